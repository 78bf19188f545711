/* A C extension with known native stacks, built by the tests with the system compiler for
 * each interpreter (tests/integration/native_ext.py): spin_c() runs in C under a known chain of
 * calls, call_back() calls a Python callable from C under another. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Not inlined, not merged into their callers' frames, not turned into tail jumps (each does
 * work after its call returns): the chain a debugger shows is the chain in the source. */
#define KEEP __attribute__((noinline, noipa))

static volatile unsigned long long sink;

#ifdef PSREC_SHIFT
/* Built with -DPSREC_SHIFT: another build of the module, its functions at other addresses (a
 * newer version of a library, installed over the one a process has loaded). */
KEEP static unsigned long long c_padding(unsigned long long n) {
  unsigned long long s = 0;
  for (unsigned long long i = 0; i < n; ++i) s += i * i ^ (s >> 3);
  for (unsigned long long i = 0; i < n; ++i) s += i * 7 ^ (s >> 5);
  for (unsigned long long i = 0; i < n; ++i) s += i * 11 ^ (s >> 7);
  return s;
}
unsigned long long (*psrec_padding)(unsigned long long) = c_padding;
#endif

KEEP static unsigned long long c_inner(unsigned long long n) {
  for (unsigned long long i = 0; i < n; ++i) sink += i;
  return sink;
}
KEEP static unsigned long long c_middle(unsigned long long n) { return c_inner(n) + 1; }
KEEP static unsigned long long c_outer(unsigned long long n) { return c_middle(n) + 1; }

/* spin_c(n): n iterations in c_inner, the GIL released. */
KEEP static PyObject* spin_c(PyObject* self, PyObject* arg) {
  (void)self;
  unsigned long long n = PyLong_AsUnsignedLongLong(arg);
  if (PyErr_Occurred()) return NULL;
  unsigned long long r;
  Py_BEGIN_ALLOW_THREADS
  r = c_outer(n);
  Py_END_ALLOW_THREADS
  return PyLong_FromUnsignedLongLong(r);
}

KEEP static PyObject* c_cb_inner(PyObject* callable) {
  PyObject* r = PyObject_CallObject(callable, NULL);
  sink += 1;
  return r;
}
KEEP static PyObject* c_cb_outer(PyObject* callable) {
  PyObject* r = c_cb_inner(callable);
  sink += 1;
  return r;
}

/* call_back(f): f() called from C, under c_cb_outer and c_cb_inner. */
KEEP static PyObject* call_back(PyObject* self, PyObject* callable) {
  (void)self;
  PyObject* r = c_cb_outer(callable);
  sink += 1;
  return r;
}

static PyMethodDef methods[] = {
    {"spin_c", spin_c, METH_O, "n iterations of a loop in C, the GIL released"},
    {"call_back", call_back, METH_O, "calls f() from C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "psrec_native_ext", NULL, -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit_psrec_native_ext(void) { return PyModule_Create(&module); }
