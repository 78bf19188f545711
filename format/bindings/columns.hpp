// Columns between C++ and Python, for the nanobind modules of the format and the analyzer:
// vectors out as bytes or as views that keep their owner alive, buffers in as 1-D arrays.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <initializer_list>
#include <string>
#include <vector>

namespace psrec::bindings {

namespace nb = nanobind;

template <typename Col>
nb::bytes asBytes(const Col& v) {
  return nb::bytes(reinterpret_cast<const char*>(v.data()),
                   v.size() * sizeof(typename Col::value_type));
}

// Read-only 1-D columns from anything with the buffer protocol (bytes, array.array).
template <typename T>
using Column = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

template <typename T>
std::vector<T> toVector(const Column<T>& c) {
  return std::vector<T>(c.data(), c.data() + c.shape(0));
}

template <typename Col>
nb::object viewOf(const Col& v, nb::handle owner) {
  using T = typename Col::value_type;
  size_t shape[1] = {v.size()};
  return nb::cast(nb::ndarray<nb::memview, const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>(
      const_cast<T*>(v.data()), 1, shape, owner));
}

inline void sameLength(const char* what, size_t n, std::initializer_list<size_t> others) {
  for (size_t m : others)
    if (m != n) throw nb::value_error((std::string(what) + ": columns of different lengths").c_str());
}

}  // namespace psrec::bindings
