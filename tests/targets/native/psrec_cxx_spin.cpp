// A C++ library for tests of native names: a function template in a namespace, a member of a
// class template, and an overload, each spinning in turn for the time it is given. Loaded
// with ctypes (tests/targets/rec_cxx.py) through the one C entry, psrec_cxx_spin.
#include <chrono>

namespace psrec_demo {

template <typename T>
struct Spinner {
  // Spins until the time is up; returns how many turns it made.
  __attribute__((noinline)) T spin(double seconds) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    T turns = 0;
    while (std::chrono::steady_clock::now() < end) turns = turns + 1;
    return turns;
  }
};

template <typename T>
__attribute__((noinline)) long twice(T seconds) {
  Spinner<long> s;
  return s.spin(seconds / 2) + s.spin(seconds / 2);
}

__attribute__((noinline)) long overloaded(double seconds) { return twice<double>(seconds); }
__attribute__((noinline)) long overloaded(int milliseconds) {
  return overloaded(milliseconds / 1000.0);
}

}  // namespace psrec_demo

extern "C" long psrec_cxx_spin(int milliseconds) { return psrec_demo::overloaded(milliseconds); }
