// Native function names as a debugger shows them: a mangled symbol (Itanium C++, which Rust's
// legacy symbols also follow) demangled by the C++ runtime's own demangler.
#pragma once

#include <string>
#include <string_view>

namespace psrec::format {

// The demangled name of symbol, or symbol itself where it is not a mangled name the runtime
// demangles (a C function's, Rust's v0 scheme).
std::string demangle(std::string_view symbol);

}  // namespace psrec::format
