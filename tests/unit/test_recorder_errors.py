"""The ptrace hint is written for this machine and this target (no native recorder needed)."""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from psrec.recorder.errors import RecorderPermissionError, _ptrace_help, ptrace_help

YAMA = "/proc/sys/kernel/yama/ptrace_scope"


def test_yama_is_named_only_where_it_restricts() -> None:
    for scope in (None, 0):
        text = _ptrace_help(1234, owner="alice", user="alice", yama_scope=scope)
        assert "yama" not in text and "ptrace_scope" not in text, text
        assert "sudo" in text and "CAP_SYS_PTRACE" in text, text
    text = _ptrace_help(1234, owner="alice", user="alice", yama_scope=1)
    assert "kernel.yama.ptrace_scope at 0 (it is 1" in text, text
    assert "sudo sysctl kernel.yama.ptrace_scope=0" in text, text
    text = _ptrace_help(1234, owner="alice", user="alice", yama_scope=2)
    assert "ptrace_scope is 2" in text and "sysctl" not in text, text
    assert "same user" not in text and "sudo" in text, text
    text = _ptrace_help(1234, owner="alice", user="alice", yama_scope=3)
    assert "ptrace_scope is 3" in text and "restart" in text and "sudo" not in text, text


def test_the_owner_is_named_when_it_is_another_user() -> None:
    text = _ptrace_help(1234, owner="alice", user="bob", yama_scope=None)
    assert "process 1234 runs as alice and psrec as bob" in text, text
    assert "run psrec as alice" in text, text
    for owner in ("bob", None):
        text = _ptrace_help(1234, owner=owner, user="bob", yama_scope=None)
        assert "runs as" not in text and "same user as the target" in text, text


def test_root_refused_is_told_it_lacks_cap_sys_ptrace() -> None:
    """Root is refused only without CAP_SYS_PTRACE (a container's default): "run it with sudo"
    would not help."""
    for scope in (None, 0, 1, 2):
        text = _ptrace_help(1234, owner="nobody", user="root", yama_scope=scope)
        assert text == ("process 1234 runs as nobody and psrec as root without CAP_SYS_PTRACE "
                        "(as in a container by default): grant it CAP_SYS_PTRACE (in Docker: "
                        "--cap-add SYS_PTRACE), or run psrec as nobody"), text
    text = _ptrace_help(1234, owner=None, user="root", yama_scope=None)
    assert text.startswith("process 1234 and psrec as root without CAP_SYS_PTRACE") and \
        "sudo" not in text, text


@contextmanager
def _process_of(uid: int) -> Iterator[int]:
    p = subprocess.Popen(["sleep", "60"], user=uid)
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as another user")
def test_help_for_a_real_process_of_another_user() -> None:
    nobody = pwd.getpwnam("nobody")
    me = pwd.getpwuid(os.getuid()).pw_name
    with _process_of(nobody.pw_uid) as pid:
        text = ptrace_help(pid)
        # as the native recorder raises it: the message names the pid
        exc = RecorderPermissionError(f"permission denied reading the memory of process {pid}")
    assert f"process {pid} runs as nobody and psrec as {me}" in text, text
    assert exc.help == text
    # (root is refused only without CAP_SYS_PTRACE, whatever Yama says)
    assert ("ptrace_scope" in text) == (os.path.exists(YAMA) and me != "root"), text


def test_help_for_a_real_process_of_this_user() -> None:
    with _process_of(os.getuid()) as pid:
        text = ptrace_help(pid)
    if os.getuid() == 0:  # root is refused only without the capability
        assert text.startswith(f"process {pid} and psrec as root without CAP_SYS_PTRACE"), text
        return
    assert "runs as" not in text and "same user as the target" in text, text
    assert ("ptrace_scope" in text) == os.path.exists(YAMA), text
    assert "runs as" not in ptrace_help(None)
