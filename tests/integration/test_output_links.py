"""No output psrec opens can be redirected, on real recordings: what anyone may plant at a name
psrec writes (a link to a block device, another user's FIFO or link, a socket, any file at a
window's or a snapshot's name) is refused or left alone, said in one line; a FIFO of one's
own is waited for, and SIGINT, SIGTERM and SIGHUP end psrec while it waits; a window whose
file cannot be created goes on in the file before it, nothing lost; copies a killed recorder
left are removed and never read."""

from __future__ import annotations

import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from psrec.format import open_recording
from rec_live import TARGETS, load, one_python, psrec, target

pytestmark = [pytest.mark.live, pytest.mark.timeout(120)]

DATA = Path(__file__).resolve().parent.parent / "data"
GOLDEN = str(DATA / "two_threads.psr")
NOBODY = 65534


def _needs_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("planting files of another user (chown) needs root")


def _of_nobody(path: Path) -> Path:
    _needs_root()
    os.lchown(path, NOBODY, NOBODY)
    return path


@contextmanager
def _loop_device(tmp_path: Path) -> Iterator[tuple[Path, bytes]]:
    """A block device (a loop device over a 1 MiB file of a known pattern), and the pattern."""
    backing = tmp_path / "disk.img"
    pattern = bytes(range(256)) * 4096
    backing.write_bytes(pattern)
    r = subprocess.run(["losetup", "--find", "--show", str(backing)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"no block device to plant: losetup failed ({r.stderr.strip()})")
    dev = Path(r.stdout.strip())
    try:
        assert stat.S_ISBLK(os.stat(dev).st_mode)
        yield dev, pattern
    finally:
        subprocess.run(["losetup", "-d", str(dev)], check=False)
        assert backing.read_bytes() == pattern, "the block device was written to"


@contextmanager
def _fifo_read(path: Path) -> Iterator[Callable[[], bytes]]:
    """A FIFO at path with a reader open on it all along, as whoever planted it would keep:
    a writer's open would succeed at once. Yields what the reader got so far."""
    os.mkfifo(path)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)

    def got() -> bytes:
        try:
            return os.read(fd, 1 << 20)
        except BlockingIOError:
            return b""

    try:
        yield got
    finally:
        os.close(fd)


def _one_error(r: subprocess.CompletedProcess[str], *words: str) -> None:
    """Exit status 1 and one error line (and its help), holding words; no traceback."""
    assert r.returncode == 1, (r.returncode, r.stderr)
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("psrec: error:")]
    assert len(errors) == 1 and len(r.stderr.splitlines()) <= 3, r.stderr
    for w in words:
        assert w in errors[0], r.stderr
    assert "Traceback" not in r.stderr


# Each planted thing: made at the output's name (in a folder anyone may write to), with what
# the refusal says; a FIFO's reader (held open all along) is added to `readers`.
Planter = Callable[[Path, ExitStack, list[Callable[[], bytes]]], str]


def _plant_block_device(out: Path, stack: ExitStack, readers: list[Callable[[], bytes]]) -> str:
    dev, _ = stack.enter_context(_loop_device(out.parent))
    out.symlink_to(dev)  # a link of one's own: a block device is refused whoever made it
    return "is a block device"


def _plant_fifo_of_nobody(out: Path, stack: ExitStack, readers: list[Callable[[], bytes]]) -> str:
    readers.append(stack.enter_context(_fifo_read(out)))
    _of_nobody(out)
    return "is a FIFO of user nobody"


def _plant_link_of_nobody_to_fifo(out: Path, stack: ExitStack,
                                  readers: list[Callable[[], bytes]]) -> str:
    readers.append(stack.enter_context(_fifo_read(out.parent / "mine.fifo")))
    out.symlink_to(out.parent / "mine.fifo")
    _of_nobody(out)
    return "is a symbolic link made by user nobody"


def _plant_link_of_nobody_to_null(out: Path, stack: ExitStack,
                                  readers: list[Callable[[], bytes]]) -> str:
    out.symlink_to("/dev/null")
    _of_nobody(out)
    return "is a symbolic link made by user nobody"


def _plant_socket(out: Path, stack: ExitStack, readers: list[Callable[[], bytes]]) -> str:
    sock = stack.enter_context(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
    sock.bind(str(out))
    sock.listen(1)
    return "is a socket"


PLANTED: dict[str, Planter] = {
    "link-to-block-device": _plant_block_device,
    "fifo-of-another-user": _plant_fifo_of_nobody,
    "link-of-another-user-to-own-fifo": _plant_link_of_nobody_to_fifo,
    "link-of-another-user-to-dev-null": _plant_link_of_nobody_to_null,
    "socket": _plant_socket,
}

COMMANDS: dict[str, Callable[[str, str], tuple[str, ...]]] = {
    "record": lambda out, python: ("record", "-q", "-o", out, "--", python, "rec_finite.py",
                                   "0.3", "0"),
    "report": lambda out, python: ("report", "--collapsed", "-o", out, GOLDEN),
    "export": lambda out, python: ("export", "--speedscope", "-o", out, GOLDEN),
    "snapshot": lambda out, python: ("snapshot", GOLDEN, "-o", out),
}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("planted", list(PLANTED))
@pytest.mark.parametrize("python", one_python())
def test_a_stream_planted_at_a_given_name_is_refused(python: str, planted: str, command: str,
                                                     tmp_path: Path) -> None:
    """Whatever is planted at the name given to -o (in a shared folder), with or without
    --force: refused in one line before anything starts (a launched program is not run),
    the planted thing left as it was, nothing written into it (a FIFO's reader, open all
    along, gets nothing; the block device's bytes are unchanged) and no file left."""
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    out = shared / "out.psr"
    readers: list[Callable[[], bytes]] = []
    with ExitStack() as stack:
        said = PLANTED[planted](out, stack, readers)
        before = os.lstat(out)
        names = set(os.listdir(shared))
        for force in ((), ("--force",)):
            args = COMMANDS[command](str(out), python)
            r = psrec(args[0], *force, *args[1:], timeout=60)
            _one_error(r, said)
            assert "ready" not in r.stdout, "the program was launched"
            after = os.lstat(out)
            assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
            assert set(os.listdir(shared)) == names
        assert all(got() == b"" for got in readers), "a planted FIFO's reader got data"


def _read_line(stream: int, want: str, timeout: float) -> str:
    """Reads the file descriptor `stream` until a line holding `want` comes; returns all read."""
    deadline = time.monotonic() + timeout
    got = b""
    while want.encode() not in got:
        left = deadline - time.monotonic()
        assert left > 0, f"{want!r} not said within {timeout} s: {got.decode(errors='replace')}"
        r, _, _ = select.select([stream], [], [], left)
        if r:
            chunk = os.read(stream, 4096)
            assert chunk, f"ended before saying {want!r}: {got.decode(errors='replace')}"
            got += chunk
    return got.decode(errors="replace")


def _signal_while_waiting(p: subprocess.Popen[bytes], sig: signal.Signals,
                          before: Callable[[], object] = lambda: None
                          ) -> tuple[str, bytes, float]:
    """Once psrec says it waits for its FIFO's reader: before(), then sig. Returns what it
    said first, the rest of its stderr, and the seconds it took to end after sig."""
    try:
        assert p.stderr is not None
        said = _read_line(p.stderr.fileno(), "waiting for a process to open the FIFO", 30)
        before()
        sent = time.monotonic()
        p.send_signal(sig)
        _, err = p.communicate(timeout=10)
        return said, err, time.monotonic() - sent
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _start(*args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "psrec", *args], cwd=str(TARGETS),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _children_running(pid: int, program: str) -> list[int]:
    """The children of pid that run program (not psrec's guard, a fork of psrec)."""
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    found = []
    for child in text.split():
        try:
            if Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0] == program.encode():
                found.append(int(child))
        except OSError:
            pass
    return found


@pytest.mark.parametrize("through_link", [False, True], ids=["fifo", "own-link-to-fifo"])
@pytest.mark.parametrize("python", one_python())
def test_a_fifo_of_ones_own_is_waited_for_and_gets_the_recording(
        python: str, through_link: bool, tmp_path: Path) -> None:
    """record -o FIFO with no reader yet: psrec says once that it waits (it never opens the
    FIFO for reading to ask whether it is a terminal), the program runs meanwhile, and the
    reader that comes later gets the whole recording, closed cleanly, from the program's
    first samples."""
    fifo = tmp_path / "rec.fifo"
    os.mkfifo(fifo)
    name = fifo
    if through_link:
        name = tmp_path / "out.psr"
        name.symlink_to(fifo)
    p = _start("record", "-q", "-o", str(name), "--", python, "rec_finite.py", "1", "0")
    try:
        assert p.stderr is not None
        said = _read_line(p.stderr.fileno(), "waiting for a process to open the FIFO", 30)
        with open(fifo, "rb") as reader:
            data = reader.read()
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, said + err.decode()
    assert (said + err.decode()).count("waiting for a process") == 1
    got = tmp_path / "got.psr"
    got.write_bytes(data)
    with open_recording(got) as rec:
        assert rec.clean and rec.stats is not None and rec.stats["stopped_by"] == "exit"
    samples = load(got)
    assert sum("finite_work" in s.functions for s in samples) >= 0.8 * len(samples) > 100


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=lambda s: s.name)
@pytest.mark.parametrize("python", one_python())
def test_every_signal_ends_a_recorder_waiting_for_a_fifo_reader(python: str,
                                                                sig: signal.Signals,
                                                                tmp_path: Path) -> None:
    """record -o FIFO that no process reads: SIGINT, SIGTERM or SIGHUP ends psrec within a
    second (the open is tried again every 50 ms, never blocked in), with one line naming
    the FIFO and the signal; the launched program is ended too, and nothing was written."""
    fifo = tmp_path / "nobody-reads.fifo"
    os.mkfifo(fifo)
    p = _start("record", "-o", str(fifo), "--", python, "rec_finite.py", "60", "0")
    program: list[int] = []
    said, err, took = _signal_while_waiting(
        p, sig, lambda: program.extend(_children_running(p.pid, python)))
    text = said + err.decode()
    assert p.returncode == 1, text
    assert took < 1.0, f"psrec took {took:.2f} s to end after {sig.name}"
    errors = [ln for ln in text.splitlines() if ln.startswith("psrec: error:")]
    assert errors == [f"psrec: error: no process opened the FIFO {fifo} for reading before "
                      f"psrec was stopped by {sig.name}: nothing was written to it"], text
    assert "Traceback" not in text
    assert len(program) == 1, "the launched program was not found"
    assert not os.path.exists(f"/proc/{program[0]}"), "the launched program runs on"
    fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        assert os.read(fd, 100) == b""
    finally:
        os.close(fd)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=lambda s: s.name)
def test_every_signal_ends_a_report_waiting_for_a_fifo_reader(sig: signal.Signals,
                                                              tmp_path: Path) -> None:
    """report -o FIFO that no process reads: the default handlers end it while it waits
    (Ctrl-C as 'interrupted', exit 130; SIGTERM and SIGHUP kill it), within a second."""
    fifo = tmp_path / "nobody-reads.fifo"
    os.mkfifo(fifo)
    p = _start("report", "--collapsed", "-o", str(fifo), GOLDEN)
    said, err, took = _signal_while_waiting(p, sig)
    assert took < 1.0, f"psrec took {took:.2f} s to end after {sig.name}"
    if sig == signal.SIGINT:
        assert p.returncode == 130 and "psrec: interrupted" in err.decode(), said + err.decode()
    else:
        assert p.returncode == -sig, (p.returncode, said + err.decode())


def test_a_terminal_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """record -o /dev/pts/N (a terminal, told from its device number: nothing is opened to
    ask) and a link of one's own to it: refused in one line, the program not launched."""
    leader, follower = os.openpty()
    try:
        tty = os.ttyname(follower)
        link = tmp_path / "tty.psr"
        link.symlink_to(tty)
        for name in (tty, str(link)):
            r = psrec("record", "-o", name, "--", sys.executable, "-c", "print('ready')")
            _one_error(r, "is a terminal")
            assert "ready" not in r.stdout
    finally:
        os.close(leader)
        os.close(follower)


def test_a_descriptor_name_is_written_where_the_descriptor_is(tmp_path: Path) -> None:
    """-o /dev/stdout writes to psrec's own standard output as it is, at its offset: a file
    opened for appending keeps what it held (it is not opened anew and truncated)."""
    out = tmp_path / "log"
    out.write_text("kept\n")
    with open(out, "a") as fh:
        r = subprocess.run([sys.executable, "-m", "psrec", "report", "--collapsed", "-o",
                            "/dev/stdout", GOLDEN], stdout=fh, stderr=subprocess.PIPE,
                           text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    assert text.startswith("kept\n") and len(text.splitlines()) > 2, text[:200]


def _summary_samples(stderr: str) -> int:
    m = re.search(r"^psrec: ([\d,]+) samples in", stderr, re.M)
    assert m, stderr
    return int(m.group(1).replace(",", ""))


def _windows(folder: Path) -> dict[int, Path]:
    return {int(p.name[2:-4]): p for p in folder.glob("w-*.psr") if p.is_file()
            and not p.is_symlink()}


@pytest.mark.parametrize("force", [False, True], ids=["", "force"])
@pytest.mark.parametrize("python", one_python())
def test_planted_window_names_are_never_followed_and_their_windows_go_on(
        python: str, force: bool, tmp_path: Path) -> None:
    """--window 1s over 5.5 s with the names of windows 1 to 3 taken: a link to a FIFO whose
    reader waits, a FIFO, a link to someone's file. None is written to or through; each
    taken window is said once, in one line naming its file, and its samples go on in the
    file before it, which says in its STATS which windows it holds; every file is closed
    whole, and together they hold every sample recorded. With --force a link is replaced
    itself (never what it points to), a FIFO still never."""
    folder = tmp_path / "shared"
    folder.mkdir(mode=0o1777)
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    (folder / "w-3.psr").symlink_to(victim)
    with _fifo_read(tmp_path / "planted.fifo") as got1, _fifo_read(folder / "w-2.psr") as got2:
        (folder / "w-1.psr").symlink_to(tmp_path / "planted.fifo")
        r = psrec("record", "-r", "200", "-o", str(folder / "w-{n}.psr"), "--window", "1s",
                  *(["--force"] if force else []), "--", python, "rec_finite.py", "5.5", "0",
                  timeout=60)
        assert got1() == b"" and got2() == b"", "a planted FIFO's reader got data"
    assert r.returncode == 0, r.stderr
    assert victim.read_bytes() == b"precious"
    assert stat.S_ISFIFO(os.lstat(folder / "w-2.psr").st_mode)
    taken = [2] if force else [1, 2, 3]
    if not force:
        assert (folder / "w-1.psr").is_symlink() and (folder / "w-3.psr").is_symlink()
    lines = [ln for ln in r.stderr.splitlines() if "go on in" in ln]
    assert len(lines) == len(taken), r.stderr
    for n, line in zip(taken, lines):
        assert line.startswith(f"psrec: cannot create {folder}/w-{n}.psr: ") and \
            f"window {n}'s samples go on in {folder}/w-{n - 1 if force else 0}.psr" in line, line
    files = _windows(folder)
    assert not set(taken) & set(files), files
    total = 0
    for n, path in sorted(files.items()):
        with open_recording(path) as rec:
            assert rec.clean and not rec.warnings, (path, rec.warnings)
            st = rec.stats
            assert st is not None
            window = 1_000_000_000 // rec.tick_ns
        samples = load(path)
        assert st["samples"] == len(samples)
        total += len(samples)
        first, last = st["windows"]
        assert first == n and {s.ts // window for s in samples} == set(range(first, last + 1))
        held = [n]
        while n + len(held) in taken:
            held.append(n + len(held))
        assert last == held[-1], (path, st["windows"], taken)
    assert total == _summary_samples(r.stderr)


@contextmanager
def _read_only(folder: Path) -> Iterator[None]:
    """folder made read-only (a read-only bind mount over it: root bypasses permission
    bits, not a read-only mount) until the block ends."""
    r = subprocess.run(["mount", "--bind", str(folder), str(folder)], capture_output=True,
                       text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot make a folder read-only (a bind mount needs root): {r.stderr}")
    try:
        r = subprocess.run(["mount", "-o", "remount,bind,ro", str(folder)], capture_output=True,
                           text=True)
        assert r.returncode == 0, r.stderr
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.parametrize("python", one_python())
def test_a_folder_made_read_only_mid_run_skips_windows_and_loses_nothing(
        python: str, tmp_path: Path) -> None:
    """--window 1s; the folder made read-only once window 1's file exists, until psrec has
    said that a window's file cannot be created: that line comes once and names the window's
    file and the file its samples go on in; once the folder is writable again the next
    window's file is created (at the next chunk); every file is closed whole and together
    they hold every sample."""
    folder = tmp_path / "windows"
    folder.mkdir()
    p = _start("record", "-r", "200", "-o", str(folder / "w-{n}.psr"), "--window", "1s",
               "--", python, "rec_finite.py", "6", "0")
    try:
        deadline = time.monotonic() + 30
        while not (folder / "w-1.psr").exists():
            assert p.poll() is None and time.monotonic() < deadline, "no window 1"
            time.sleep(0.01)
        assert p.stderr is not None
        with _read_only(folder):
            said = _read_line(p.stderr.fileno(), "go on in", 10)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    text = said + err.decode()
    assert p.returncode == 0, text
    lines = [ln for ln in text.splitlines() if "go on in" in ln]
    assert len(lines) == 1, text
    m = re.match(rf"psrec: cannot create {folder}/w-(\d+)\.psr: read-only file system; "
                 rf"window (\d+)'s samples go on in {folder}/w-(\d+)\.psr ", lines[0])
    assert m and m.group(1) == m.group(2) and int(m.group(3)) < int(m.group(1)), lines[0]
    skipped = int(m.group(1))
    files = _windows(folder)
    assert max(files) > skipped, f"no window's file after the folder was writable: {files}"
    total = 0
    for path in files.values():
        with open_recording(path) as rec:
            assert rec.clean and not rec.warnings, (path, rec.warnings)
            assert rec.stats is not None
            total += rec.stats["samples"]
    assert total == _summary_samples(text)
    with open_recording(files[int(m.group(3))]) as rec:
        assert rec.stats is not None and rec.stats["windows"][1] >= skipped


@pytest.mark.parametrize("planted", ["link-to-file", "fifo"])
@pytest.mark.parametrize("python", one_python())
def test_a_sigusr1_snapshot_name_taken_is_said_and_never_followed(
        python: str, planted: str, tmp_path: Path) -> None:
    """The SIGUSR1 snapshot's name (NAME.snapshot-TIME.psr, to the second) taken for the
    next 20 seconds, by links to someone's file or by FIFOs whose reader waits: psrec says in
    one line that the snapshot is not written, writes nothing there or through, and goes on
    recording to a clean file."""
    out = tmp_path / "fr.psr"
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    readers: list[int] = []
    with target(python, "rec_finite.py", "60") as t:
        p = _start("record", "-q", "-r", "200", "-o", str(out), str(t.pid))
        try:
            deadline = time.monotonic() + 30
            while not out.exists() or out.stat().st_size < 200:
                assert p.poll() is None and time.monotonic() < deadline, "no recording"
                time.sleep(0.01)
            now = int(time.time())
            for second in range(now - 1, now + 20):
                stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(second))
                name = tmp_path / f"fr.snapshot-{stamp}.psr"
                if planted == "fifo":
                    os.mkfifo(name)
                    readers.append(os.open(name, os.O_RDONLY | os.O_NONBLOCK))
                else:
                    name.symlink_to(victim)
            p.send_signal(signal.SIGUSR1)
            assert p.stderr is not None
            said = _read_line(p.stderr.fileno(), "snapshot not written", 10)
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=30)
        finally:
            if p.poll() is None:
                p.kill()
                p.wait()
            for fd in readers:
                try:
                    assert os.read(fd, 100) == b"", "a planted FIFO's reader got data"
                except BlockingIOError:
                    pass
                os.close(fd)
    text = said + err.decode()
    assert p.returncode == 0, text
    kind = "a FIFO" if planted == "fifo" else "a symbolic link"
    lines = [ln for ln in text.splitlines() if "snapshot" in ln]
    assert len(lines) == 1 and re.fullmatch(
        rf"psrec: snapshot not written: cannot create {tmp_path}/fr\.snapshot-\d{{8}}T\d{{6}}Z"
        rf"\.psr: {kind} is there", lines[0]), text
    assert victim.read_bytes() == b"precious"
    with open_recording(out) as rec:
        assert rec.clean
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".part")]


@pytest.mark.parametrize("python", one_python())
def test_copies_a_killed_recorder_left_are_removed_and_never_read(python: str,
                                                                  tmp_path: Path) -> None:
    """.NAME.XXXX.keep and .NAME.XXXX.part beside a name (a recorder killed in a rewrite, or
    while creating a file over an old one) are removed when a recording of that name
    starts, a plain one or a window's; other files are left; a folder read as recordings
    reads neither."""
    junk = b"\x00not a recording" * 10
    stale = [".run.psr.abcd1234.keep", ".run.psr.x1y2z3.part", ".w-1.psr.abcdefgh.part",
             ".w-2.psr.q_9.keep"]
    others = [".run.psr.notes", ".run.psr.abc.keep.bak", ".other.psr.abcd1234.keep", "notes"]
    for name in stale + others:
        (tmp_path / name).write_bytes(junk)
    r = psrec("record", "-q", "-o", str(tmp_path / "run.psr"), "--", python, "rec_finite.py",
              "0.3", "0")
    assert r.returncode == 0, r.stderr
    r = psrec("record", "-q", "-r", "200", "-o", str(tmp_path / "w-{n}.psr"), "--window", "1s",
              "--", python, "rec_finite.py", "2.5", "0")
    assert r.returncode == 0, r.stderr
    left = set(os.listdir(tmp_path))
    assert not left & set(stale), sorted(left)
    assert set(others) <= left
    folder = psrec("report", "--collapsed", "-o", "-", str(tmp_path))
    assert folder.returncode == 0 and "finite_work" in folder.stdout, folder.stderr
