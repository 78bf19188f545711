// Typed recorder errors. The bindings translate each code into a class of psrec.recorder.errors.
#pragma once

#include <stdexcept>
#include <string>

namespace psrec::recorder {

enum class ErrorCode {
  kNoSuchProcess,       // the pid does not exist (or exited)
  kPermissionDenied,    // ptrace access mode check failed
  kNotPython,           // no CPython runtime found in the process
  kUnsupportedVersion,  // a CPython we have no layout for
  kReadFailed,          // memory could not be read (unmapped, torn)
  kInternal,
};

class RecorderError : public std::runtime_error {
 public:
  RecorderError(ErrorCode code, const std::string& message)
      : std::runtime_error(message), code_(code) {}
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

}  // namespace psrec::recorder
