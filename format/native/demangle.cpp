#include "format/native/demangle.hpp"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace psrec::format {

std::string demangle(std::string_view symbol) {
  // Only an Itanium mangled name: __cxa_demangle would also read a plain C name as a type
  // ("i" as int).
  if (symbol.size() < 3 || symbol.substr(0, 2) != "_Z") return std::string(symbol);
  const std::string mangled(symbol);
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> out(
      abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status), std::free);
  return status == 0 && out ? std::string(out.get()) : mangled;
}

}  // namespace psrec::format
