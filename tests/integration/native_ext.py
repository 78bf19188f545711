"""Builds tests/targets/native/psrec_native_ext.c for an interpreter with the system compiler,
against that interpreter's own headers (inside its root for the provisioned ones), once per
interpreter and test session; and what tests/targets/rec_native.py's threads are known to
run, for the tests of native frames to check their stacks against."""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from rec_live import ROOTS, TARGETS, is_free_threaded, minor_of

SOURCE = TARGETS / "native" / "psrec_native_ext.c"

# The c-spinner thread's stack, innermost first: C under its Python caller.
CHAIN = ["c_inner", "c_middle", "c_outer", "spin_c", "c_caller"]
# The c-callback thread's, in the callback: Python under C under Python.
CALLBACK = ["py_callback", "c_cb_inner", "c_cb_outer", "call_back", "callback_caller"]
# Each blocked thread's Python frame, and what it waits in above it.
WAITS = {
    # time.sleep waits in clock_nanosleep, or select() before 3.11.
    "sleeper": ("sleeper", re.compile(r"nanosleep|^(__)?select$")),
    # The C library's own wait functions are static: named where its detached debug file is
    # installed (libc6-dbg), else the interpreter's function that called them.
    "locked": ("lock_waiter",
               re.compile(r"(__new_)?sem_(clock|timed)?wait|pthread_cond_(timed|clock)?wait"
                          r"|.*futex|_PySemaphore_Wait|PyThread_acquire_lock")),
    "reader": ("socket_reader", re.compile(r"^(__(libc_)?)?recv(from)?$|poll")),
}


def waits_for_the_gil(native: list[str]) -> bool:
    """Whether the native functions above the gil-waiter's Python frame (innermost first) wait
    for the GIL: take_gil where the interpreter has its symbols, else (a stripped one) the
    condition variable it waits on, and not the sleep."""
    if "take_gil" in native:
        return True
    return not any("nanosleep" in n or n in ("select", "__select") for n in native) and any(
        n.startswith(("pthread_cond_", "__pthread_cond_")) for n in native)
_BUILT: dict[str, Path] = {}
_PATHS = ("import sysconfig as s; p = s.get_paths(); "
          "print(p['include']); print(p['platinclude']); print(s.get_config_var('EXT_SUFFIX'))")


def build(python: str, *defines: str) -> Path:
    """The folder holding psrec_native_ext built for python (under /tmp, which the provisioned
    roots share with the host); with defines (-D names), a build of its own, not kept."""
    if python in _BUILT and not defines:
        return _BUILT[python]
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "no C compiler (gcc) on this machine: the native tests build their extension"
    r = subprocess.run([python, "-c", _PATHS], capture_output=True, text=True, timeout=60,
                       cwd=str(TARGETS))
    assert r.returncode == 0, r.stderr
    include, platinclude, suffix = r.stdout.split()
    root = ROOTS.get(python)

    def here(path: str) -> str:
        return str(root / path.lstrip("/")) if root else path

    out = Path(tempfile.mkdtemp(prefix="psrec-native-ext-"))
    out.chmod(0o755)
    atexit.register(shutil.rmtree, out, True)
    built = subprocess.run(
        [cc, "-shared", "-fPIC", "-O2", *(f"-D{d}" for d in defines),
         "-I", here(include), "-I", here(platinclude),
         # Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>: the
         # root's include folder, searched after this machine's own.
         *(["-idirafter", here("/usr/include")] if root else []),
         str(SOURCE), "-o", str(out / f"psrec_native_ext{suffix}")],
        capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    if not defines:
        _BUILT[python] = out
    return out


def deny_perf() -> Path:
    """tests/targets/native/deny_perf.c built: runs a command where perf_event_open fails."""
    out = Path(tempfile.mkdtemp(prefix="psrec-deny-perf-"))
    atexit.register(shutil.rmtree, out, True)
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "no C compiler (gcc) on this machine: the native tests build their helpers"
    built = subprocess.run([cc, "-O2", str(TARGETS / "native" / "deny_perf.c"), "-o",
                            str(out / "deny_perf")], capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    return out / "deny_perf"


def forget(python: str) -> None:
    """Builds the extension again for python on the next build() (its folder was removed)."""
    _BUILT.pop(python, None)


# Wheels from PyPI (numpy, uvloop), one folder per package and interpreter ABI, installed by
# this environment's pip for the target interpreter (the provisioned ones have no pip of their
# own); kept between sessions under the user's cache, which the provisioned roots share with
# the host.
WHEEL_CACHE = Path(os.environ.get("PSREC_TEST_WHEELS",
                                  os.path.expanduser("~/.cache/psrec-tests/wheels")))
_WHEELS: dict[tuple[str, str], Path | str] = {}


def wheel_for(python: str, package: str) -> Path | str:
    """A folder holding package's PyPI wheel for python's version and ABI (to put first on its
    sys.path), or why none could be installed (a skip reason)."""
    if (python, package) in _WHEELS:
        return _WHEELS[(python, package)]
    major, minor = minor_of(python)
    abi = f"cp{major}{minor}{'t' if is_free_threaded(python) else ''}"
    folder = WHEEL_CACHE / f"{package}-{abi}"
    if not (folder / package / "__init__.py").exists():
        WHEEL_CACHE.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{package}-{abi}-", dir=WHEEL_CACHE))
        r = subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
             "--no-deps", "--only-binary=:all:", "--target", str(staging),
             "--python-version", f"{major}.{minor}", "--implementation", "cp", "--abi", abi,
             *(a for tag in ("manylinux_2_28_x86_64", "manylinux2014_x86_64")
               for a in ("--platform", tag)),
             package], capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            shutil.rmtree(staging, True)
            last = (r.stderr.strip().splitlines() or ["(no output)"])[-1]
            _WHEELS[(python, package)] = (f"{package}'s wheel for {abi} could not be installed "
                                          f"from PyPI: {last}")
            return _WHEELS[(python, package)]
        staging.chmod(0o755)
        try:
            staging.rename(folder)
        except OSError:  # another session installed it meanwhile
            shutil.rmtree(staging, True)
    _WHEELS[(python, package)] = folder
    return folder
