"""One stack from a thread's native and Python frames, in call order, as spec/psr-format.md
section 10 ("Native frames and mixed stacks") defines it.

A thread's native stack holds one frame of the interpreter's evaluation loop
(``_PyEval_EvalFrameDefault``, which the recorder finds by its symbol or, in a stripped
interpreter, as the largest function of its binary) for every time C entered Python code.
Its Python stack is cut into as many runs: each run begins (outermost) at a frame entered
from C and holds the frames that loop ran. Each evaluation-loop frame is replaced by its run,
outermost with outermost. When the two counts differ, the stacks were not read at one moment
(or a loop was entering or leaving): they are not interleaved, and the caller says so.

The interpreter's functions that only carry a call from one Python frame to the next, or into a
C function (vectorcall trampolines, the code-object runners), are hidden with the loop's frames
unless all frames are asked for: they say nothing that the frames around them do not.
"""

from __future__ import annotations

# Not typing's: typing imports re, which costs more than `psrec dump --native PID` spends
# interleaving (mypy takes any name TYPE_CHECKING for typing's).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TypeVar

    F = TypeVar("F")  # a native frame
    P = TypeVar("P")  # a Python frame

__all__ = ["CALL_MACHINERY", "FRAME_KINDS", "MARKER", "MARKER_KIND", "NATIVE_VIEWS",
           "frame_kind", "hides", "interleave", "is_call_machinery", "marked_note"]

# How a report shows a recording's native frames: interleaved with the Python ones, the
# evaluation loop's and the call machinery's left out ("mixed"); all of them ("all"); none
# ("python": the Python frames only, as a recording without native frames shows).
NATIVE_VIEWS = ("mixed", "all", "python")


# Functions of CPython 3.8-3.15 that carry calls and nothing else (hidden unless asked for).
CALL_MACHINERY = frozenset({
    "_PyEval_EvalFrame", "_PyEval_Vector", "_PyEval_EvalCode", "_PyEval_EvalCodeWithName",
    "PyEval_EvalCode", "PyEval_EvalCodeEx", "_PyFunction_Vectorcall", "_PyFunction_FastCallDict",
    "_PyFunction_FastCallKeywords", "function_code_fastcall", "call_function", "do_call_core",
    "_PyObject_Vectorcall", "_PyObject_VectorcallTstate", "PyObject_Vectorcall",
    "_PyObject_VectorcallDictTstate", "PyObject_VectorcallDict", "PyObject_VectorcallMethod",
    "_PyObject_FastCall", "_PyObject_FastCallDict", "_PyObject_FastCallDictTstate",
    "_PyObject_FastCallKeywords", "_PyObject_FastCallTstate", "_PyObject_Call", "PyObject_Call",
    "PyVectorcall_Call", "_PyVectorcall_Call", "_PyObject_MakeTpCall", "_PyObject_Call_Prepend",
    "_PyObject_CallNoArgs", "PyObject_CallOneArg", "_PyObject_CallOneArg", "PyObject_CallObject",
    "PyEval_CallObjectWithKeywords", "_PyObject_CallNoArg", "PyObject_CallNoArgs",
    "object_vacall", "PyObject_CallFunctionObjArgs", "PyObject_CallMethodObjArgs",
    "_PyCFunction_FastCallKeywords", "_PyMethodDef_RawFastCallKeywords",
    "_PyMethodDef_RawFastCallDict", "_PyCFunction_FastCallDict", "cfunction_call",
    "cfunction_call_varargs", "cfunction_vectorcall_FASTCALL",
    "cfunction_vectorcall_FASTCALL_KEYWORDS", "cfunction_vectorcall_FASTCALL_KEYWORDS_METHOD",
    "cfunction_vectorcall_NOARGS", "cfunction_vectorcall_O", "method_vectorcall",
    "method_vectorcall_FASTCALL", "method_vectorcall_FASTCALL_KEYWORDS",
    "method_vectorcall_FASTCALL_KEYWORDS_METHOD", "method_vectorcall_NOARGS",
    "method_vectorcall_O", "method_vectorcall_VARARGS", "method_vectorcall_VARARGS_KEYWORDS",
    "vectorcall_method", "vectorcall_unbound", "slot_tp_call", "_Py_VectorCall",
})


# The name of the marker (FUNCTION kind 4) a recording puts where a sample's native frames
# belong but were not captured at the instant of its Python frames (spec section 10, rule 7).
MARKER = "[native frames not captured]"
MARKER_KIND = 4  # its FUNCTION kind (spec 3.1)

# Above this share of marked samples, psrec says so and what lowers it.
MARKED_NOTE_SHARE = 0.01


def marked_note(marked: int, samples: int) -> str:
    """What the summary, `psrec info`, the reports' header and the HTML page say of a native
    recording's marked samples: "" below MARKED_NOTE_SHARE."""
    if not samples or marked / samples <= MARKED_NOTE_SHARE:
        return ""
    return (f"{marked / samples:.1%} of samples ({marked:,}) have native frames not captured at "
            f"the instant of their Python frames, shown as {MARKER}; a lower rate (-r 100) "
            "leaves psrec the time to pair more of them by stopping each thread briefly, and "
            "--blocking pairs every sample (the whole process stopped each time)")


def is_call_machinery(function: str) -> bool:
    return function in CALL_MACHINERY


def hides(kind: int, name: str, view: str) -> bool:
    """Whether a report in the given native view (NATIVE_VIEWS) leaves out a frame of a
    function of this kind (spec 3.1: 0 Python, 1 native, 2 the evaluation loop, 3 the
    interpreter's code that no symbol names, 4 the marker of native frames not captured) and
    name. The marker stands wherever native frames are shown."""
    if kind == 0 or view == "all":
        return False
    if view == "python":
        return True
    # Kinds from later formats are left out with the loop's and the unnamed interpreter's.
    return kind != MARKER_KIND and (kind >= 2 or name in CALL_MACHINERY)


# What a frame is, by name, as the Parquet export's `kind` column gives it (spec
# parquet.md): Python code, native code, the evaluation loop, the interpreter's code that no
# symbol names, the call machinery, the marker of native frames not captured.
FRAME_KINDS = ("python", "native", "eval_loop", "interpreter", "call_machinery", "marker")


def frame_kind(kind: int, name: str) -> str:
    """A frame's FRAME_KINDS name from its function's kind (spec 3.1) and name; kinds from
    later formats are "interpreter", left out with it."""
    if kind == 0:
        return "python"
    if kind == MARKER_KIND:
        return "marker"
    if kind == 1:
        return "call_machinery" if name in CALL_MACHINERY else "native"
    return "eval_loop" if kind == 2 else "interpreter"


def interleave(native: Sequence[F], native_names: Sequence[str], is_eval: Sequence[bool],
               python: Sequence[P], entry: Sequence[bool],
               hide: bool = True) -> list[F | P] | None:
    """The thread's stack, innermost first, from its native frames (innermost first, with
    native_names their functions, "" where unnamed, and is_eval[i] true where frame i is the
    evaluation loop's) and its Python frames (innermost first, with entry[i] true where frame
    i was entered from C). None when the native stack's evaluation-loop frames and the Python
    stack's runs do not pair off. With hide, the call machinery between them is left out; the
    loop's frames always are."""
    # Runs of Python frames, outermost first; each begins at a frame entered from C.
    runs: list[list[P]] = []
    for i in range(len(python) - 1, -1, -1):
        if entry[i] or not runs:
            runs.append([])
        runs[-1].append(python[i])
    loops = sum(1 for e in is_eval if e)
    if loops != len(runs):
        return None
    out: list[F | P] = []
    run = 0
    for i in range(len(native) - 1, -1, -1):
        name = native_names[i]
        if is_eval[i]:
            out.extend(runs[run])
            run += 1
        elif not (hide and name in CALL_MACHINERY):
            out.append(native[i])
    out.reverse()
    return out
