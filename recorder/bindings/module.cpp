#include <nanobind/nanobind.h>
NB_MODULE(_recorder, m) {}
