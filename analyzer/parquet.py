"""`psrec export --parquet DIR RECORDING...`: recordings as one Parquet dataset (spec
parquet.md), for engines made for many of them: DuckDB on one machine, Dask or Spark on many.

The files given are taken by recording (spec psr-format.md section 11, rule 1: its windows,
snapshots and flight recordings are files of one), and each DATA chunk of samples a recording
has is written once, however many of its files hold it: what one export writes of a recording
is a *part* of the dataset, with an id of its own (RECORDING below: HOST-PID-CREATED-MONO-SEQ),
one file in each table: its samples under samples/host=HOST/date=YYYY-MM-DD/ (hive partitions:
the engines read them as columns), its stacks, threads and description beside them. The
recordings table lists the chunks each part holds, so that a later export (`--force`) writes
only the chunks the dataset does not hold yet, and replaces the parts it holds whole.

A sample carries the time it stands for and the CPU time psrec's reports give it (the CPU used
between two samples of a thread goes to the earlier when this one is off a CPU and that one was
on a CPU: spec section 5), so that summing them answers as `psrec report` does.

The dataset changes at once or not at all (_Dataset): its new state is built in a hidden
folder beside it and swapped in with one rename, under a lock that one export holds at a time.

Needs pyarrow (`pip install 'psrec[parquet]'`).
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import os
import shutil
import stat
import tempfile
import time
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Callable

from psrec.format import (
    SAMPLE_COLUMNS,
    PsrecError,
    chunk_seq,
    open_recording,
    recordings_in,
)
from psrec.format import constants as C
from psrec.format.mixed_stacks import frame_kind, hides

from .model import NO_STACK
from .registry import Option, Reporter, register

if TYPE_CHECKING:
    from psrec.format.reader import Definitions, Frame, Recording, ThreadInfo

__all__ = ["ParquetExporter", "SCHEMA_VERSION", "TABLES", "Written", "path_name",
           "write_dataset"]

SCHEMA_VERSION = 4
TABLES = ("samples", "stacks", "threads", "recordings")
# The samples' row groups: engines read and skip a row group at a time. A batch of more
# samples (a chunk holds up to MAX_CHUNK_SAMPLES) is taken a row group at a time, so that what
# an export holds at once stays bounded by it.
ROW_GROUP = 1 << 20
# Columns of few values, dictionary-encoded; those whose statistics let an engine skip row
# groups (a time window, a process, a thread). The rest is written as it is, which is cheaper.
DICTIONARY = ["recording", "pid", "thread", "stack_id", "task"]
STATISTICS = ["ts", "pid", "thread"]
# The file in the dataset's folder that an export holds locked (fcntl.flock) while it writes.
LOCK = ".psrec-lock"
# The most bytes a name taken from a recording (its host) may take in a file or folder name.
NAME_BYTES = 96
INT64 = 1 << 63


def _arrow() -> Any:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        if exc.name not in ("pyarrow", "pyarrow.parquet"):  # found, but does not load here
            raise PsrecError(f"export --parquet needs pyarrow, which does not load here "
                             f"({exc})", help="pip install --force-reinstall pyarrow") from None
        raise PsrecError("export --parquet needs pyarrow, which is not installed",
                         help="pip install 'psrec[parquet]'") from None
    return pa, pq


def _schemas(pa: Any) -> dict[str, Any]:
    """The tables' columns (spec/parquet.md says what each holds)."""
    return {
        "samples": pa.schema([
            ("recording", pa.dictionary(pa.int32(), pa.string())),
            ("pid", pa.uint32()),
            ("thread", pa.uint32()),
            ("ts", pa.timestamp("ns", tz="UTC")),
            ("wall_ns", pa.int64()),
            ("cpu_ns", pa.int64()),
            ("gil_held", pa.bool_()),
            ("on_cpu", pa.bool_()),
            ("gil_wait", pa.bool_()),
            ("stack_id", pa.uint32()),
            ("task", pa.uint32()),
        ]),
        "stacks": pa.schema([
            ("recording", pa.string()),
            ("stack_id", pa.uint32()),
            ("depth", pa.uint16()),
            ("leaf", pa.bool_()),
            ("function", pa.string()),
            ("file", pa.string()),
            ("first_line", pa.int32()),
            ("line", pa.int32()),
            ("native", pa.bool_()),
            ("outermost", pa.bool_()),
            ("kind", pa.string()),
            ("view_leaf", pa.bool_()),
        ]),
        "threads": pa.schema([
            ("recording", pa.string()),
            ("thread", pa.uint32()),
            ("pid", pa.uint32()),
            ("os_tid", pa.uint32()),
            ("python_tid", pa.uint64()),
            ("name", pa.string()),
        ]),
        "recordings": pa.schema([
            ("recording", pa.string()),
            ("host", pa.string()),
            ("hostname", pa.string()),
            ("pid", pa.uint32()),
            ("command", pa.string()),
            ("python_version", pa.string()),
            ("created", pa.timestamp("ns", tz="UTC")),
            ("created_mono_ns", pa.uint64()),
            ("rate_hz", pa.float64()),
            ("files", pa.list_(pa.string())),
            ("chunks", pa.list_(pa.uint64())),
            ("samples", pa.uint64()),
            ("schema_version", pa.uint16()),
        ]),
    }


# -- names --------------------------------------------------------------------------------

_PLAIN = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._")


def path_name(text: str, limit: int = NAME_BYTES) -> str:
    """`text`, a name a recording gives (its host), as a file or folder name: the one way such a
    name reaches a path. ASCII letters, digits, '-', '.' and '_' stay as they are; every other
    byte of its UTF-8 (a '/', NUL, control characters, '%') becomes %XX, as in a URL, which is
    how DuckDB, pyarrow, Dask and Spark read a hive partition's value back; so does a first
    '.', '_' or '-' (engines skip a file whose name begins with '.' or '_'). A name past
    `limit` bytes is cut, and '~' and 8 hex digits of a hash of the whole text end it (a '~'
    of the text is %7E), so that two names stay two; so does the empty name."""
    raw = text.encode("utf-8", "surrogatepass")
    pieces = [chr(b) if b in _PLAIN and not (i == 0 and b in b".-_") else f"%{b:02X}"
              for i, b in enumerate(raw)]
    name = "".join(pieces)
    if name and len(name) <= limit:
        return name
    kept, size = [], 0
    for piece in pieces:
        if size + len(piece) > limit - 9:
            break
        kept.append(piece)
        size += len(piece)
    return "".join(kept) + "~" + hashlib.blake2b(raw, digest_size=4).hexdigest()


# -- what an export wrote -----------------------------------------------------------------

@dataclass(frozen=True)
class Written:
    """What write_dataset did: the recordings and files given, the thread-samples written,
    those given twice or more (counted once), those the dataset held already (left as they
    were), and the parts of the dataset replaced by what was written."""

    recordings: int
    files: int
    samples: int
    given_twice: int = 0
    already_held: int = 0
    replaced: int = 0
    warnings: tuple[str, ...] = ()

    def summary(self, out: str) -> str:
        n = self.recordings
        text = f"{self.samples:,} samples of {n} recording{'s' if n != 1 else ''}"
        if self.files != n:
            text += f" in {self.files} files"
        if self.given_twice:
            text += f"; {self.given_twice:,} samples given twice counted once"
        if self.already_held:
            text += f"; {self.already_held:,} samples {out} held already left as they were"
        if self.replaced:
            text += f"; {self.replaced} part{'s' if self.replaced != 1 else ''} of it replaced"
        return text


# -- the recordings given -----------------------------------------------------------------

@dataclass(frozen=True)
class _Key:
    """What makes files files of one recording (psr-format.md section 11, rule 1)."""

    created_wall_ns: int
    created_mono_ns: int
    hostname: str | None
    pid: int | None

    @property
    def host(self) -> str:
        """The samples' host partition (path_name of the hostname)."""
        return path_name(self.hostname) if self.hostname is not None else "unknown"

    @property
    def prefix(self) -> str:
        """A part's id without its SEQ: HOST-PID-CREATED-MONO."""
        pid = str(self.pid) if self.pid is not None else "unknown"
        return f"{self.host}-{pid}-{self.created_wall_ns}-{self.created_mono_ns}"


def _key_of(rec: Recording) -> _Key:
    md = rec.metadata
    host, pid = md.get("hostname"), md.get("pid")
    return _Key(rec.header.created_wall_ns, rec.header.created_mono_ns,
                host if isinstance(host, str) else None,
                pid if isinstance(pid, int) and not isinstance(pid, bool) else None)


def _recordings(paths: list[str]) -> dict[_Key, list[str]]:
    """The files given, by recording, in the order first given."""
    out: dict[_Key, list[str]] = {}
    for path in paths:
        with open_recording(path) as rec:
            out.setdefault(_key_of(rec), []).append(path)
    return out


# -- errors -------------------------------------------------------------------------------

def _os_error(exc: OSError, shown: str) -> PsrecError:
    """An error of the file system, met while writing the dataset `shown`, in one line that
    says what to do. The dataset is as it was: nothing of it changed before the error."""
    code = exc.errno
    where = f" ({os.path.basename(exc.filename)})" if isinstance(exc.filename, str) else ""
    kept = f"{shown} is as it was" if os.path.isdir(shown) else "nothing was written"
    if code in (errno.EACCES, errno.EPERM):
        return PsrecError(f"cannot write {shown}: permission denied{where}",
                          help=f"give -o a folder you may write to; {kept}")
    if code == errno.EROFS:
        return PsrecError(f"cannot write {shown}: its file system is read-only",
                          help=f"give -o a folder on a disk psrec may write; {kept}")
    if code in (errno.ENOSPC, errno.EDQUOT):
        what = "no space left on its disk" if code == errno.ENOSPC else "the disk quota is used up"
        return PsrecError(f"cannot write {shown}: {what}",
                          help=f"free some space, or give -o a folder on another disk; {kept}")
    if code == errno.EFBIG:
        return PsrecError(f"cannot write {shown}: a file would pass the largest this process "
                          "may write (ulimit -f)",
                          help=f"raise the limit: ulimit -f unlimited; {kept}")
    if code == errno.ENAMETOOLONG:
        return PsrecError(f"cannot write {shown}: a name is too long for its file system{where}",
                          help=f"give -o a shorter path; {kept}")
    if code in (errno.EXDEV, errno.EBUSY):
        return PsrecError(f"cannot write {shown}: it is a mount point, which psrec cannot swap "
                          "for the dataset's new state", help=f"give -o a folder inside it; {kept}")
    if code in (errno.EMFILE, errno.ENFILE):
        return PsrecError(f"cannot write {shown}: too many open files",
                          help=f"raise the limit (ulimit -n), or export fewer at once; {kept}")
    reason = exc.strerror or str(exc)
    return PsrecError(f"cannot write {shown}: {reason[:1].lower() + reason[1:]}{where}",
                      help=kept)


def _out_of_memory(path: str) -> PsrecError:
    return PsrecError(f"{path}: ran out of memory exporting it",
                      help="export it alone, or where more memory is free; a small file that "
                           "needs this much was damaged or made to hurt its reader (psrec info "
                           "says what it holds); the dataset is as it was")


def _does_not_fit(path: str, what: str) -> PsrecError:
    return PsrecError(f"{path}: {what} (a damaged or hand-made file)",
                      help="export the other recordings without it; the dataset is as it was")


# -- the dataset folder -------------------------------------------------------------------

@dataclass(frozen=True)
class _Held:
    """A part the dataset holds already: its id and the chunk sequence numbers it lists."""

    id: str
    chunks: frozenset[int]


def _renameat2(src: str, dst: str, flags: int) -> None:
    """renameat2(2) (RENAME_EXCHANGE = 2, RENAME_NOREPLACE = 1); OSError as os.rename raises."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fn = getattr(libc, "renameat2", None)
    at_fdcwd = -100
    if fn is not None:
        r = fn(at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), flags)
    else:  # a C library older than renameat2 (glibc 2.28): the system call (x86_64: 316)
        r = libc.syscall(316, at_fdcwd, os.fsencode(src), at_fdcwd, os.fsencode(dst), flags)
    if r != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), src, None, dst)


class _Dataset:
    """The dataset's folder while an export writes it. The export holds LOCK in it, locked
    (fcntl.flock: the system releases it when the process ends, however it ends), and builds
    the new state in a hidden folder beside it, the staging (.NAME.psrec-PID-XXXXXXXX): the new
    files, then hard links to every file of the dataset that stays. commit() swaps the two
    folders in one rename (RENAME_EXCHANGE), so that a reader finds the old state whole or the
    new one whole, and an export stopped at any point before it (an error, Ctrl-C, SIGKILL)
    leaves the old one; the old state, then under the staging's name, is removed after it. A
    staging left by a killed export is removed by the next export beside it."""

    def __init__(self, out_dir: str, force: bool) -> None:
        self.shown = out_dir
        # A symbolic link (even one to nothing yet) names the folder it points to.
        self.path = os.path.realpath(out_dir)
        self.parent = os.path.dirname(self.path)
        self.name = os.path.basename(self.path)
        self.force = force
        self.existed = False
        self.staging: str | None = None
        self.held: dict[_Key, list[_Held]] = {}
        self._lock_fd: int | None = None
        self._made_lock = False  # LOCK made in an empty folder given: removed on failure
        self._mode = 0o777 & ~_umask()
        self._owner: tuple[int, int] | None = None

    # -- opening --------------------------------------------------------------------------
    def open(self, pq: Any) -> None:
        shown = self.shown
        if not os.path.isdir(self.parent):
            raise PsrecError(f"cannot write {shown}: {self.parent} is not a folder",
                             help="make it first (mkdir -p), or give -o a path in a folder "
                                  "that exists")
        if os.path.lexists(self.path) and not os.path.isdir(self.path):
            raise PsrecError(f"{shown} is a file: --parquet writes a folder",
                             help="give a folder name with -o")
        try:
            if os.path.isdir(self.path):
                self._open_existing(pq)
            self._remove_stale()
            self._make_staging()
        except OSError as exc:
            self.close(failed=True)
            raise _os_error(exc, shown) from None
        except BaseException:
            self.close(failed=True)
            raise

    def _open_existing(self, pq: Any) -> None:
        self.existed = True
        # A folder its owner may not write (chmod a-w) is not written, though it could be
        # swapped for another.
        if not os.access(self.path, os.W_OK | os.X_OK):
            read_only = os.statvfs(self.path).f_flag & os.ST_RDONLY
            code = errno.EROFS if read_only else errno.EACCES
            raise OSError(code, os.strerror(code), self.path)
        st = os.stat(self.path)
        self._mode = stat.S_IMODE(st.st_mode)
        self._owner = (st.st_uid, st.st_gid)
        names = [n for n in os.listdir(self.path) if n != LOCK]
        if names and not os.path.isdir(os.path.join(self.path, "recordings")):
            raise PsrecError(f"{self.shown} exists and is not a psrec dataset",
                             help="give a new folder with -o")
        if names and not self.force:
            raise PsrecError(f"{self.shown} exists", help="pass --force to add the recordings "
                                                          "to it")
        self._lock(os.path.join(self.path, LOCK), made_here=not names)
        self.held = self._read_parts(pq)

    def _lock(self, path: str, made_here: bool) -> None:
        """Takes LOCK at `path`, or says which export holds it. A lock taken on a file that
        is no longer at its name (removed by an export that failed) is taken again."""
        import fcntl

        for _ in range(10):
            self._made_lock = made_here and not os.path.exists(path)
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666 & ~_umask())
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode(errors="replace").strip()
                os.close(fd)
                raise PsrecError(
                    f"{self.shown} is being written by another export"
                    + (f" (pid {holder})" if holder.isdigit() else ""),
                    help="run this one again when that one is done") from None
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if same:
                self._lock_fd = fd
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
                return
            os.close(fd)
        raise PsrecError(f"{self.shown}: its lock file {LOCK} keeps changing",
                         help="run the export again")

    def _read_parts(self, pq: Any) -> dict[_Key, list[_Held]]:
        """The parts the dataset holds, by recording, from its recordings table; a table of
        another schema version is not added to (its files would not read as one table)."""
        folder = os.path.join(self.path, "recordings")
        held: dict[_Key, list[_Held]] = {}
        if not os.path.isdir(folder):  # an empty folder given
            return held
        names = sorted(n for n in os.listdir(folder)
                       if n.endswith(".parquet") and not n.startswith((".", "_")))
        for name in names:
            try:
                table = pq.read_table(os.path.join(folder, name))
            except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
                raise PsrecError(f"{self.shown}/recordings/{name} does not read as Parquet "
                                 f"({exc})", help="remove its part's files (one a table) or "
                                 "write a new dataset with -o") from None
            names_in = set(table.column_names)
            versions = (table.column("schema_version").to_pylist()
                        if "schema_version" in names_in else [None])
            for found in versions:
                if found != SCHEMA_VERSION:
                    raise PsrecError(
                        f"{self.shown} is a dataset of schema version {found}; this psrec "
                        f"writes version {SCHEMA_VERSION}, whose tables differ",
                        help="write a new dataset with -o (export its recordings again)")
            created = table.column("created").cast("int64").to_pylist()
            for row, wall in zip(table.select(["recording", "hostname", "pid",
                                               "created_mono_ns", "chunks"]).to_pylist(),
                                 created):
                key = _Key(wall, row["created_mono_ns"], row["hostname"], row["pid"])
                held.setdefault(key, []).append(
                    _Held(row["recording"], frozenset(row["chunks"] or ())))
        return held

    def _remove_stale(self) -> None:
        """Removes the stagings a killed export left beside the dataset: those whose lock no
        process holds (or the dataset's own, which this export holds)."""
        import fcntl

        prefix = f".{self.name}.psrec-"
        for entry in os.scandir(self.parent):
            if not entry.name.startswith(prefix) or not entry.is_dir(follow_symlinks=False):
                continue
            lock = os.path.join(entry.path, LOCK)
            try:
                fd = os.open(lock, os.O_RDWR | os.O_CLOEXEC)
            except FileNotFoundError:
                # Made but not yet locked (the instant between the two), or left so by an
                # export killed then: stale when the process its name gives has ended, or
                # when it is old (a process of that number may be another's now).
                if not _maker_alive(entry.name[len(prefix):]):
                    shutil.rmtree(entry.path, ignore_errors=True)
                    continue
                try:
                    old = time.time() - entry.stat(follow_symlinks=False).st_mtime > 60
                except FileNotFoundError:
                    continue
                if old:
                    shutil.rmtree(entry.path, ignore_errors=True)
                continue
            try:
                ours = self._lock_fd is not None and os.path.samestat(
                    os.fstat(fd), os.fstat(self._lock_fd))
                if not ours:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # another export's, at work
            finally:
                os.close(fd)
            shutil.rmtree(entry.path, ignore_errors=True)

    def _make_staging(self) -> None:
        try:
            self.staging = tempfile.mkdtemp(prefix=f".{self.name}.psrec-{os.getpid()}-",
                                            dir=self.parent)
        except PermissionError:
            raise PsrecError(f"cannot write {self.shown}: permission denied in {self.parent}, "
                             "where psrec makes the dataset's new state before it swaps it in",
                             help="give -o a folder in a folder you may write to") from None
        lock = os.path.join(self.staging, LOCK)
        if self._lock_fd is not None:
            os.link(os.path.join(self.path, LOCK), lock)
        else:  # a new dataset: its own lock, which says the staging is at work
            self._lock(lock, made_here=False)
        for table in TABLES:
            made = os.path.join(self.staging, table)
            os.mkdir(made)
            old = os.path.join(self.path, table)
            os.chmod(made, stat.S_IMODE(os.stat(old).st_mode) if os.path.isdir(old)
                     else 0o777 & ~_umask())

    # -- committing -----------------------------------------------------------------------
    def commit(self, written: set[str], removed: set[str]) -> None:
        """Puts the staging in the dataset's place: the parts `written` (ids) are in it, the
        parts `removed` and the old files of those written go, every other file stays."""
        assert self.staging is not None
        shown = self.shown
        try:
            if self.existed:
                if not written and not removed:
                    return
                self._link_kept(written | removed)
            os.chmod(self.staging, self._mode)
            self._give_owner()
            _sync(self.staging)
            if self.existed:
                self._exchange()
            else:
                try:
                    _renameat2(self.staging, self.path, 1)  # RENAME_NOREPLACE
                except OSError as exc:
                    if exc.errno in (errno.EEXIST, errno.ENOTEMPTY):
                        raise PsrecError(f"{shown} was made by another export while this one "
                                         "ran", help="run this one again with --force to add "
                                                     "its recordings to it") from None
                    if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                        raise
                    os.rename(self.staging, self.path)  # no renameat2 here
                self.staging = None
                self._made_lock = False
        except OSError as exc:
            raise _os_error(exc, shown) from None

    def _link_kept(self, gone: set[str]) -> None:
        """Hard links, in the staging, to every file of the dataset that stays: all but the
        files of the parts `gone` (replaced or removed) and what the staging has already."""
        assert self.staging is not None
        names = {f"{rid}.parquet" for rid in gone}
        for folder, dirs, files in os.walk(self.path):
            rel = os.path.relpath(folder, self.path)
            target = os.path.join(self.staging, rel) if rel != "." else self.staging
            in_table = rel != "." and rel.split(os.sep, 1)[0] in TABLES
            made = False
            for name in files:
                if name == LOCK and rel == ".":
                    continue
                if in_table and name in names:
                    continue
                dst = os.path.join(target, name)
                if os.path.lexists(dst):
                    continue
                if not made:
                    self._makedirs(target, folder)
                    made = True
                os.link(os.path.join(folder, name), dst, follow_symlinks=False)
            for d in list(dirs):
                src = os.path.join(folder, d)
                if os.path.islink(src):  # a link to a folder: os.walk lists it, and stops
                    self._makedirs(target, folder)
                    os.link(src, os.path.join(target, d), follow_symlinks=False)
                elif rel == "." and d not in TABLES:  # a folder of the user's, empty or not
                    self._makedirs(os.path.join(target, d), src)

    def _makedirs(self, target: str, like: str) -> None:
        """The folders down to `target` in the staging, with the modes of the dataset's."""
        if os.path.isdir(target):
            return
        self._makedirs(os.path.dirname(target), os.path.dirname(like))
        os.mkdir(target)
        os.chmod(target, stat.S_IMODE(os.stat(like).st_mode))

    def _give_owner(self) -> None:
        """Run as root on another user's dataset: what the export made is that user's."""
        if self._owner is None or os.geteuid() != 0 or self._owner == (0, 0):
            return
        assert self.staging is not None
        uid, gid = self._owner
        for folder, dirs, files in os.walk(self.staging):
            for name in [*dirs, *files]:
                path = os.path.join(folder, name)
                if os.lstat(path).st_nlink == 1 or os.path.isdir(path):
                    os.lchown(path, uid, gid)
        os.lchown(self.staging, uid, gid)

    def _exchange(self) -> None:
        assert self.staging is not None
        try:
            _renameat2(self.staging, self.path, 2)  # RENAME_EXCHANGE
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
            # A file system without RENAME_EXCHANGE (NFS): two renames, with an instant
            # between them when the dataset's name is free.
            old = tempfile.mkdtemp(prefix=f".{self.name}.psrec-{os.getpid()}-", dir=self.parent)
            os.rename(self.path, old)
            os.rename(self.staging, self.path)
            self.staging = old

    def close(self, failed: bool) -> None:
        """Removes the staging (the old state, after commit) and releases the lock. A lock
        file made in an empty folder given goes too, when the export failed."""
        if self.staging is not None:
            shutil.rmtree(self.staging, ignore_errors=True)
            self.staging = None
        if failed and self._made_lock:
            try:
                os.unlink(os.path.join(self.path, LOCK))
            except OSError:
                pass
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None


def _maker_alive(tail: str) -> bool:
    """Whether the process that made a staging (its name's tail: PID-XXXXXXXX) may still run:
    a process of that number exists here, or the name gives none (a staging of an older psrec,
    or made on another host sharing the folder, is judged by its age alone)."""
    pid, sep, _ = tail.partition("-")
    if not sep or not pid.isdigit():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _sync(folder: str) -> None:
    """Flushes the file system of `folder` to its disk (syncfs), so that a power failure after
    the swap finds the new files whole."""
    import ctypes

    fd = os.open(folder, os.O_RDONLY | os.O_CLOEXEC)
    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
        if fn is None or fn(fd) != 0:
            os.fsync(fd)
    finally:
        os.close(fd)


# -- one part: what one export writes of a recording --------------------------------------

@dataclass(frozen=True)
class _Job:
    key: _Key
    files: tuple[str, ...]
    held: tuple[_Held, ...]
    staging: str
    shown: str


@dataclass(frozen=True)
class _Outcome:
    part: str | None = None
    samples: int = 0
    given_twice: int = 0
    already_held: int = 0
    removed: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    error: tuple[str, str | None] | None = None


def _run(job: _Job) -> _Outcome:
    """A recording's part, in this process or a worker's: its error as (message, help),
    which pickles."""
    try:
        pa, pq = _arrow()
        return _Part(pa, pq, job).write()
    except PsrecError as exc:
        return _Outcome(error=(exc.message, exc.help))
    except OSError as exc:
        err = _os_error(exc, job.shown)
        return _Outcome(error=(err.message, err.help))
    except MemoryError:
        err = _out_of_memory(job.files[0])
        return _Outcome(error=(err.message, err.help))


@dataclass
class _Plan:
    """A file's DATA chunks: by offset, its sequence number (None: its BEGIN gives none) and
    whether it holds a sampling pass (a chunk of no passes, the names a file begun anew
    carries, reuses the number of a chunk of samples: spec psr-format.md section 7)."""

    path: str
    chunks: dict[int, tuple[int | None, bool]] = field(default_factory=dict)

    @property
    def sample_seqs(self) -> set[int]:
        return {seq for seq, passes in self.chunks.values() if passes and seq is not None}


# Records _holds_pass reads at most: a chunk that holds more before its first PASS was made to
# be walked (a chunk of carried names holds one a renamed thread).
WALKED = 100_000


def _holds_pass(payload: bytes) -> bool:
    """Whether a DATA payload holds a PASS record (records are type, length, body: spec 3),
    for a file without an index; one whose first WALKED records hold none is taken to."""
    pos, end = 0, len(payload)
    for _ in range(WALKED):
        if pos >= end:
            return False
        rtype = payload[pos]
        pos += 1
        length = shift = 0
        while True:
            if pos >= end or shift > 63:
                return False
            b = payload[pos]
            pos += 1
            length |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        if rtype == C.REC_PASS:
            return True
        pos += length
    return True


def _plan(path: str) -> _Plan:
    """The file's chunks of samples, as far as reading it goes: within the budget of
    uncompressed bytes its stream keeps to (spec section 9.3), so that reading them first
    costs what reading them again does."""
    plan = _Plan(path)
    with open_recording(path) as rec:
        raw = 0
        for info in rec.data_chunks():
            raw += info.raw_length
            if raw > rec.budgets.data_raw:
                break
            payload = rec.payload(info)
            if payload is not None:  # a damaged one: reading it says so
                passes = info.passes > 0 if rec.clean else _holds_pass(payload)
                plan.chunks[info.offset] = (chunk_seq(payload), passes)
    return plan


class _Part:
    """What one export writes of one recording: each chunk of samples of its files once (the
    first file, in order of their first chunks, that yields it gives it), but those a part
    the dataset keeps holds; the parts whose chunks it holds all are replaced."""

    def __init__(self, pa: Any, pq: Any, job: _Job) -> None:
        import numpy as np

        self.pa, self.pq, self.job = pa, pq, job
        self.schemas = _schemas(pa)
        self.key = job.key
        self.rid = self.folder = ""
        self.warnings: list[str] = []
        self.metadata: dict[str, Any] | None = None  # the first file's
        self.stacks = _Stacks()
        self.threads: dict[int, ThreadInfo] = {}
        self.taken: set[int] = set()  # the chunks of samples written
        self.samples = self.twice = self.already = 0
        self._tick = 0
        self._pid_of = np.zeros(1, np.uint32)
        # The samples file, the row group being gathered, the slice whose CPU times the next
        # one may change, each thread's last sample, the stack nodes used.
        self._writer: Any = None
        self._out: _Output | None = None
        self._group: list[Any] = []
        self._pending: dict[str, Any] | None = None
        self._last: dict[int, tuple[bool, dict[str, Any], int]] = {}
        self._used: set[int] = set()

    def write(self) -> _Outcome:
        import numpy as np

        job, key = self.job, self.key
        if key.created_wall_ns >= INT64:
            raise _does_not_fit(job.files[0], f"its creation time ({key.created_wall_ns} ns) "
                                              "is past the 64-bit nanoseconds of Parquet's "
                                              "timestamps")
        if key.pid is not None and not 0 <= key.pid < 1 << 32:
            raise _does_not_fit(job.files[0], f"its pid {key.pid} does not fit 32 bits")
        plans = sorted((_plan(p) for p in job.files),
                       key=lambda p: min(p.sample_seqs, default=INT64))
        given: set[int] = set().union(*(p.sample_seqs for p in plans))
        removed = [h for h in job.held if h.chunks <= given]
        kept = [h for h in job.held if not h.chunks <= given]
        held = frozenset().union(*(h.chunks for h in kept))
        self._name(given - held, kept)
        try:
            for plan in plans:
                self._read(np, plan, held)
            self._check_replaced(removed)
            if self._pending is not None:
                self._add(self._pending, last_one=True)
            if not self.samples and not self.taken and kept:  # nothing new: no part
                if self._out is not None:
                    self._out.discard()
                return self._outcome(None, removed)
            self._finish(plans)
        except BaseException:
            if self._out is not None:
                self._out.discard()
            raise
        return self._outcome(self.rid, removed)

    def _name(self, new: set[int], kept: list[_Held]) -> None:
        """The part's id (HOST-PID-CREATED-MONO-SEQ: SEQ its first new chunk's), never that
        of a part kept, and where its samples go."""
        key = self.key
        seq = str(min(new)) if new else "none"
        rid, n = f"{key.prefix}-{seq}", 1
        while any(h.id == rid for h in kept):  # its chunk SEQ did not read, and a later one
            n += 1
            rid = f"{key.prefix}-{seq}-{n}"
        self.rid = rid
        day = dt.datetime.fromtimestamp(key.created_wall_ns / 1e9, dt.timezone.utc)
        self.folder = os.path.join("samples", f"host={key.host}", f"date={day:%Y-%m-%d}")

    def _check_replaced(self, removed: list[_Held]) -> None:
        """A part is replaced only by one that holds all it held."""
        lost = {s for h in removed for s in h.chunks} - self.taken
        if lost:
            s = min(lost)
            part = next(h.id for h in removed if s in h.chunks)
            raise PsrecError(f"{self.job.shown} holds chunk {s} of a recording the files given "
                             f"hold (its part {part}), which they do not read whole",
                             help="psrec info says what is wrong with them: leave them out, or "
                                  "export them into a new folder")

    def _outcome(self, rid: str | None, removed: list[_Held]) -> _Outcome:
        return _Outcome(rid, self.samples, self.twice, self.already,
                        tuple(h.id for h in removed), tuple(self.warnings))

    # -- reading --------------------------------------------------------------------------
    def _read(self, np: Any, plan: _Plan, held: frozenset[int]) -> None:
        """A file's samples: those of its chunks the part takes, a row group at a time."""
        with open_recording(plan.path) as rec:
            self._tick = rec.tick_ns
            if self.metadata is None:
                self.metadata = rec.metadata
            defs = rec.definitions()
            self._add_threads(np, defs, plan.path)
            stream = rec.stream()
            self.stacks.begin(stream.decoder, defs)
            for batch in stream:
                n = len(batch)
                info = stream.current
                if not n or info is None:
                    continue
                seq, _ = plan.chunks.get(info.offset, (None, True))
                if seq is not None:
                    if seq in held:
                        self.already += n
                        continue
                    if seq in self.taken:
                        self.twice += n
                        continue
                    self.taken.add(seq)
                raw = {c.name: np.frombuffer(memoryview(getattr(batch, c.name)).cast("B"),
                                             dtype=np.dtype(c.typecode)) for c in SAMPLE_COLUMNS}
                raw["node"] = self.stacks.nodes(np, raw["node"])
                self.samples += n
                for lo in range(0, n, ROW_GROUP):
                    cols = _columns(np, raw, lo, min(n, lo + ROW_GROUP), rec.tick_ns)
                    self._check_times(np, cols, rec)
                    _attribute_cpu(np, cols, self._last)
                    self._used.update(np.unique(cols["node"]).tolist())
                    if self._pending is not None:
                        self._add(self._pending)  # its CPU times are final now
                    self._pending = cols
            defs.apply_renames(list(stream.events) + stream.outside_renames)
            self._merge_threads(defs)
            self.stacks.end()
            self.warnings += rec.warnings

    def _check_times(self, np: Any, cols: dict[str, Any], rec: Recording) -> None:
        """Times Parquet's 64-bit nanoseconds hold (numpy's arithmetic would wrap)."""
        tick, created = rec.tick_ns, self.key.created_wall_ns
        ts = cols["ts"]
        lo, hi = created + int(ts.min()) * tick, created + int(ts.max()) * tick
        longest = max(int(cols["weight"].max()), int(cols["cpu"].max())) * tick
        if lo < -INT64 or hi >= INT64:
            raise _does_not_fit(rec.path, f"a sample's time ({hi if hi >= INT64 else lo} ns "
                                          "since the epoch) is outside the 64-bit nanoseconds "
                                          "of Parquet's timestamps")
        if longest >= INT64:
            raise _does_not_fit(rec.path, f"a sample stands for {longest} ns, past 64 bits")

    def _add_threads(self, np: Any, defs: Definitions, path: str) -> None:
        """The file's threads' processes, for its samples' pid column."""
        pids = {ref: t.pid for ref, t in defs.threads.items() if ref <= C.MAX_THREAD_REF}
        for ref, t in self.threads.items():
            pids.setdefault(ref, t.pid)
        for pid in pids.values():
            if not 0 <= pid < 1 << 32:
                raise _does_not_fit(path, f"a thread's pid {pid} does not fit 32 bits")
        # By ref (refs run to 2^24: an array of them all takes at most 64 MiB, and is read
        # ten times as fast as a search); 0 for a ref no THREAD defines.
        self._pid_of = np.zeros(max(pids, default=0) + 1, dtype=np.uint32)
        for ref, pid in pids.items():
            self._pid_of[ref] = pid

    def _merge_threads(self, defs: Definitions) -> None:
        """A recording's files define its threads under the same refs (spec section 11, rule
        1): each keeps every name the files give it, the last one as its name."""
        for ref, t in defs.threads.items():
            have = self.threads.get(ref)
            if have is None:
                self.threads[ref] = t
            elif t.names:
                names = sorted(set(have.names) | set(t.names))
                have.names = names
                have.name = names[-1][1]

    # -- writing --------------------------------------------------------------------------
    def _add(self, cols: dict[str, Any], last_one: bool = False) -> None:
        """A slice of samples, whose CPU times are final, into the row group being gathered."""
        table = self._table(cols)
        if table is not None:
            self._group.append(table)
        if self._group and (last_one or sum(len(t) for t in self._group) >= ROW_GROUP):
            self._samples_writer().write_table(self.pa.concat_tables(self._group))
            self._group.clear()

    def _samples_writer(self) -> Any:
        if self._writer is None:
            self._out = _Output(self.job.staging, self.folder, self.rid)
            self._writer = self.pq.ParquetWriter(
                self._out.file, self.schemas["samples"], use_dictionary=DICTIONARY,
                write_statistics=STATISTICS)
        return self._writer

    def _table(self, cols: dict[str, Any]) -> Any:
        """A slice's samples as a table of the samples schema (None for none)."""
        import numpy as np

        pa = self.pa
        n = len(cols["ts"])
        if not n:
            return None
        status, thread, tick = cols["status"], cols["thread"], self._tick
        pid_of = self._pid_of
        pid = (pid_of[thread] if int(thread.max()) < len(pid_of)
               else np.where(thread < len(pid_of), pid_of[np.minimum(thread, len(pid_of) - 1)],
                             0).astype(np.uint32))
        return pa.table({
            "recording": pa.DictionaryArray.from_arrays(np.zeros(n, np.int32), [self.rid]),
            "pid": pid,
            "thread": thread,
            "ts": pa.array(self.key.created_wall_ns + cols["ts"] * tick,
                           pa.timestamp("ns", tz="UTC")),
            "wall_ns": cols["weight"] * tick,
            "cpu_ns": cols["cpu_owned"] * tick,
            "gil_held": (status & C.STATUS_GIL_HELD) != 0,
            "on_cpu": (status & (C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN)) == C.STATUS_ON_CPU,
            "gil_wait": (status & (C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN))
            == (C.STATUS_GIL_REQUESTED | C.STATUS_GIL_REQUESTED_KNOWN),
            "stack_id": cols["node"],
            "task": cols["task"],
        }, schema=self.schemas["samples"])

    def _finish(self, plans: list[_Plan]) -> None:
        """The part's files: its samples (made whole), stacks, threads and description."""
        pa, key, rid, path = self.pa, self.key, self.rid, self.job.files[0]
        self._samples_writer()
        assert self._out is not None
        self._writer.close()
        self._out.done()
        parents, frames = self.stacks.trie()
        with _fitting(pa, path, "stacks"):
            stacks = _stack_rows(pa, self.stacks.frame, parents, frames, self._used, rid)
        ts = list(self.threads.values())
        self._write_table(path, "stacks", stacks)
        self._write_table(path, "threads", {
            "recording": [rid] * len(ts), "thread": [t.ref for t in ts],
            "pid": [t.pid for t in ts], "os_tid": [t.os_tid for t in ts],
            "python_tid": [t.python_tid for t in ts], "name": [t.name for t in ts],
        })
        md = self.metadata or {}
        self._write_table(path, "recordings", {
            "recording": [rid],
            "host": [_unquote(key.host)],
            "hostname": [key.hostname], "pid": [key.pid],
            "command": [" ".join(md.get("command") or [])],
            "python_version": [str(md.get("python_version") or "")],
            "created": [key.created_wall_ns], "created_mono_ns": [key.created_mono_ns],
            "rate_hz": [float(md.get("rate_hz") or 0.0)],
            "files": [[os.path.abspath(p.path) for p in plans]],
            "chunks": [sorted(self.taken)], "samples": [self.samples],
            "schema_version": [SCHEMA_VERSION],
        })

    def _write_table(self, path: str, table: str, columns: dict[str, Any]) -> None:
        with _fitting(self.pa, path, table):
            data = self.pa.table(columns, schema=self.schemas[table])
        out = _Output(self.job.staging, table, self.rid)
        try:
            self.pq.write_table(data, out.file)
        except BaseException:
            out.discard()
            raise
        out.done()


@contextmanager
def _fitting(pa: Any, path: str, table: str) -> Iterator[None]:
    """Values a recording gives that do not fit their Parquet columns: said in one line."""
    try:
        yield
    except (OverflowError, pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise _does_not_fit(path, f"a value of its {table} table does not fit its Parquet "
                                  f"column ({exc})") from None


def _unquote(name: str) -> str:
    """A partition's value as engines read it back (path_name undone)."""
    from urllib.parse import unquote

    return unquote(name, errors="surrogateescape")


class _Output:
    """A file of the part in the staging: written under a name of its own that no engine
    reads (a leading '.', no .parquet: mkstemp, in the folder it goes to), and renamed to
    FOLDER/RID.parquet when whole (the commit flushes the file system before the swap)."""

    def __init__(self, staging: str, folder: str, rid: str) -> None:
        where = os.path.join(staging, folder)
        os.makedirs(where, exist_ok=True)
        fd, self.temp = tempfile.mkstemp(prefix=f".{rid[:40]}.", suffix=".tmp", dir=where)
        os.fchmod(fd, 0o666 & ~_umask())  # as a file made by open(); mkstemp's is private
        self.path = os.path.join(where, f"{rid}.parquet")
        self.file: BinaryIO = os.fdopen(fd, "wb")

    def done(self) -> None:
        self.file.close()
        os.replace(self.temp, self.path)

    def discard(self) -> None:
        try:
            self.file.close()
        except OSError:
            pass
        try:
            os.unlink(self.temp)
        except OSError:
            pass


class _Stacks:
    """The stack trie of a part (its stack_id namespace): the first file's decoder's trie as
    it is, and each later file's nodes put onto it by parent and frame, its frames matched to
    the part's by what they are (function and line), as the files of a recording may number
    them alike or not."""

    def __init__(self) -> None:
        self._first: Any = None  # the first file's decoder, while its trie is the part's
        self._first_defs: Definitions | None = None
        self.parents: array[int] | None = None  # once a second file comes
        self.frames: array[int] | None = None
        self._nodes: dict[tuple[int, int], int] = {}
        self._by_key: dict[tuple[Any, ...], int] = {}
        self._extra: dict[int, Frame] = {}  # frames the first file did not have
        self._next_frame = 1
        self._decoder: Any = None
        self._defs: Definitions | None = None
        self._node_map = array("I", [0])
        self._frame_map: dict[int, int] = {}

    def begin(self, decoder: Any, defs: Definitions) -> None:
        if self._first is None and self.parents is None:
            self._first, self._first_defs = decoder, defs
            return
        if self.parents is None:
            self._adopt_first()
        self._decoder, self._defs = decoder, defs
        self._node_map = array("I", [0])
        self._frame_map = {}

    def end(self) -> None:
        self._decoder = None

    def _adopt_first(self) -> None:
        import numpy as np

        assert self._first_defs is not None
        par = np.frombuffer(self._first.trie_parents(), dtype=np.uint32)
        frm = np.frombuffer(self._first.trie_frames(), dtype=np.uint32)
        self.parents, self.frames = array("I", par.tobytes()), array("I", frm.tobytes())
        self._nodes = {(p, f): n for n, (p, f) in
                       enumerate(zip(par.tolist(), frm.tolist())) if n}
        for fid, fr in self._first_defs.frames.items():
            self._by_key.setdefault(_frame_key(fr), fid)
        self._next_frame = max([*self._first_defs.frames, *frm.tolist(), 0]) + 1
        self._first = None

    def nodes(self, np: Any, node: Any) -> Any:
        """A batch's stack nodes (its decoder's) as the part's."""
        if self._decoder is None:
            return node
        self._extend(np)
        return np.frombuffer(self._node_map, dtype=np.uint32)[node]

    def _extend(self, np: Any) -> None:
        dec, node_map = self._decoder, self._node_map
        size = dec.trie_size()
        start = len(node_map)
        if size <= start:
            return
        assert self.parents is not None and self.frames is not None
        par = np.frombuffer(dec.trie_parents(), dtype=np.uint32)[start:size].tolist()
        frm = np.frombuffer(dec.trie_frames(), dtype=np.uint32)[start:size].tolist()
        for p, f in zip(par, frm):
            key = (node_map[p], self._frame(f))
            got = self._nodes.get(key)
            if got is None:
                got = self._nodes[key] = len(self.parents)
                self.parents.append(key[0])
                self.frames.append(key[1])
            node_map.append(got)

    def _frame(self, fid: int) -> int:
        got = self._frame_map.get(fid)
        if got is None:
            assert self._defs is not None
            fr = self._defs.frame(fid)
            key = _frame_key(fr)
            got = self._by_key.get(key)
            if got is None:
                got = self._by_key[key] = self._next_frame
                self._extra[got] = fr
                self._next_frame += 1
            self._frame_map[fid] = got
        return got

    def trie(self) -> tuple[Any, Any]:
        if self.parents is not None:
            return self.parents, self.frames
        if self._first is None:
            return array("I", [0]), array("I", [0])
        return self._first.trie_parents(), self._first.trie_frames()

    def frame(self, fid: int) -> Frame:
        got = self._extra.get(fid)
        if got is not None:
            return got
        assert self._first_defs is not None
        return self._first_defs.frame(fid)


def _frame_key(fr: Frame) -> tuple[Any, ...]:
    f = fr.function
    return (f.filename, f.name, f.first_line, f.kind, f.build_id, f.address, fr.line)


def _columns(np: Any, raw: dict[str, Any], lo: int, hi: int, tick: int) -> dict[str, Any]:
    """Rows lo..hi of a batch's sample columns as numpy arrays (copied: the batch is
    refilled)."""
    out = {}
    for column in SAMPLE_COLUMNS:  # spec 8.1: each column's array typecode
        src = raw[column.name][lo:hi]
        out[column.name] = src.astype(np.int64 if column.name in ("cpu", "weight", "ts")
                                      else src.dtype, copy=True)
    out["cpu_owned"] = out["cpu"].copy()
    return out


def _attribute_cpu(np: Any, cols: dict[str, Any],
                   last: dict[int, tuple[bool, dict[str, Any], int]]) -> None:
    """Moves the CPU time of each sample off a CPU whose thread's previous sample was on one
    to that previous sample (spec section 5), also across batches (the previous batch is
    written only after this one is seen)."""
    status, cpu, thread = cols["status"], cols["cpu"], cols["thread"]
    cpu_bits = status & (C.STATUS_ON_CPU | C.STATUS_CPU_UNKNOWN)
    on = cpu_bits == C.STATUS_ON_CPU
    off = cpu_bits == 0
    n = len(thread)
    if not n:
        return
    # A stable sort of 16-bit keys is a radix sort: refs past 65,535 (a file names up to
    # 2^24 threads) are ranked first.
    keys = thread if int(thread.max()) <= 0xFFFF else np.unique(thread, return_inverse=True)[1]
    order = np.argsort(keys.astype(np.uint16) if int(keys.max()) <= 0xFFFF else keys,
                       kind="stable")
    t_sorted = thread[order]
    first_of_thread = np.ones(n, dtype=bool)
    first_of_thread[1:] = t_sorted[1:] != t_sorted[:-1]
    prev = np.full(n, -1, dtype=np.int64)
    prev[order[1:][~first_of_thread[1:]]] = order[:-1][~first_of_thread[1:]]
    owned = cols["cpu_owned"]
    inside = (prev >= 0) & (cpu > 0) & off
    inside_move = inside.copy()
    inside_move[inside] = on[prev[inside]]
    if inside_move.any():
        np.add.at(owned, prev[inside_move], cpu[inside_move])
        owned[inside_move] = 0
    # Each thread's first sample here: its previous one is the last of an earlier batch.
    for i in order[first_of_thread].tolist():
        ref = int(thread[i])
        before = last.get(ref)
        if before is not None and cpu[i] > 0 and off[i] and before[0]:
            before[1]["cpu_owned"][before[2]] += cpu[i]
            owned[i] = 0
    # Each thread's last sample here, for the next batch.
    last_of_thread = np.ones(n, dtype=bool)
    last_of_thread[:-1] = t_sorted[:-1] != t_sorted[1:]
    for i in order[last_of_thread].tolist():
        last[int(thread[i])] = (bool(on[i]), cols, i)


def _stack_rows(pa: Any, frame_of: Callable[[int], Frame], parents: Any, frames: Any,
                used: set[int], rid: str) -> dict[str, Any]:
    """Each stack the samples have, root first, one row a frame (in stack and depth order).
    The trie is walked for all stacks at once, a level a step; each distinct frame is named
    once."""
    import numpy as np

    par = np.frombuffer(parents, dtype=np.uint32)
    frm = np.frombuffer(frames, dtype=np.uint32)
    nodes = np.array(sorted(used - {0}), dtype=np.int64)
    at, frame_ids, levels = [], [], []
    idx, cur, level = np.arange(len(nodes)), nodes, 0
    while len(cur):
        at.append(idx)
        frame_ids.append(frm[cur])
        levels.append(np.full(len(cur), level, dtype=np.int64))
        cur = par[cur].astype(np.int64)
        more = cur != 0
        idx, cur, level = idx[more], cur[more], level + 1
    node_i = np.concatenate(at) if at else np.zeros(0, np.int64)
    frame_id = np.concatenate(frame_ids) if at else np.zeros(0, np.uint32)
    lengths = np.bincount(node_i, minlength=len(nodes))
    depth = lengths[node_i] - 1 - (np.concatenate(levels) if at else np.zeros(0, np.int64))
    order = np.lexsort((depth, node_i))
    node_i, frame_id, depth = node_i[order], frame_id[order], depth[order]
    unique, which = np.unique(frame_id, return_inverse=True)
    named = [frame_of(int(f)) for f in unique.tolist()]
    stack_id = nodes[node_i]
    leaf = depth == lengths[node_i] - 1
    # A function's outermost frame in each stack (rows are in stack, then depth, order):
    # the first row of each (stack, function) pair.
    keys: dict[tuple[str, str, int], int] = {}
    function_of = np.array([keys.setdefault((f.function.name, f.function.filename,
                                             f.function.first_line), len(keys))
                            for f in named], dtype=np.int64)
    pair = node_i * (len(keys) + 1) + function_of[which]
    outermost = np.zeros(len(pair), dtype=bool)
    outermost[np.unique(pair, return_index=True)[1]] = True
    names = [f.function.name for f in named]
    files = [f.function.filename for f in named]
    first_lines = [f.function.first_line for f in named]
    # A native frame's line is its offset in its function, no source line: none.
    lines = [None if f.function.native else f.line for f in named]
    natives = [f.function.native for f in named]
    kinds = [frame_kind(f.function.kind, f.function.name) for f in named]
    # The innermost frame of each stack that psrec report's default view (mixed) shows: the
    # evaluation loop's, the unnamed interpreter's and the call machinery's frames are not.
    shown = np.array([not hides(f.function.kind, f.function.name, "mixed") for f in named],
                     dtype=bool)
    rows_shown = np.flatnonzero(shown[which]) if len(named) else np.zeros(0, np.int64)
    last = np.ones(len(rows_shown), dtype=bool)
    last[:-1] = node_i[rows_shown][1:] != node_i[rows_shown][:-1]
    view_leaf = np.zeros(len(which), dtype=bool)
    view_leaf[rows_shown[last]] = True
    if 0 in used:  # samples with no Python frame: one frame, as the reports name it
        stack_id = np.concatenate([[0], stack_id])
        depth = np.concatenate([[0], depth])
        leaf = np.concatenate([[True], leaf])
        outermost = np.concatenate([[True], outermost])
        view_leaf = np.concatenate([[True], view_leaf])
        kinds.append("none")
        which = np.concatenate([[len(named)], which])
        names.append(NO_STACK.name)
        files.append(NO_STACK.filename)
        first_lines.append(NO_STACK.line)
        lines.append(0)
        natives.append(False)
    which = which.astype(np.int32)

    def strings(values: list[str]) -> Any:
        return pa.DictionaryArray.from_arrays(which, pa.array(values, pa.string())).cast(
            pa.string())

    return {
        "recording": pa.DictionaryArray.from_arrays(np.zeros(len(which), np.int32),
                                                    [rid]).cast(pa.string()),
        "stack_id": stack_id.astype(np.uint32),
        "depth": depth.astype(np.uint16),
        "leaf": leaf,
        "function": strings(names),
        "file": strings(files),
        "first_line": np.array(first_lines, dtype=np.int32)[which],
        "line": pa.array(lines, pa.int32()).take(which),
        "native": np.array(natives, dtype=bool)[which],
        "outermost": outermost,
        "kind": strings(kinds),
        "view_leaf": view_leaf,
    }


# -- the export ---------------------------------------------------------------------------

def write_dataset(paths: list[str], out_dir: str, force: bool = False) -> Written:
    """Writes the recordings at `paths` into the dataset at out_dir: a new folder, or with
    force one written before, which gets the chunks of samples it does not hold (spec
    parquet.md). All of it or nothing: a failure leaves the dataset as it was."""
    pa, pq = _arrow()
    paths = list(dict.fromkeys(os.path.realpath(p) for p in paths))
    groups = _recordings(paths)
    dataset = _Dataset(out_dir, force)
    dataset.open(pq)
    failed = True
    try:
        assert dataset.staging is not None
        jobs = [_Job(key, tuple(files), tuple(dataset.held.get(key, ())), dataset.staging,
                     out_dir) for key, files in groups.items()]
        outcomes = list(_run_all(jobs))
        written = {o.part for o in outcomes if o.part is not None}
        removed = {rid for o in outcomes for rid in o.removed}
        dataset.commit(written, removed)
        failed = False
    finally:
        dataset.close(failed)
    return Written(len(groups), len(paths), sum(o.samples for o in outcomes),
                   sum(o.given_twice for o in outcomes), sum(o.already_held for o in outcomes),
                   len(removed), tuple(w for o in outcomes for w in o.warnings))


def _run_all(jobs: list[_Job]) -> Iterator[_Outcome]:
    """Each recording's part, as many at once as there are CPUs (pyarrow writes a file on
    one thread, and the recordings are independent); the first error stops the others."""
    workers = min(len(jobs), len(os.sched_getaffinity(0)))
    if workers <= 1:
        for job in jobs:
            outcome = _run(job)
            if outcome.error is not None:
                raise PsrecError(outcome.error[0], help=outcome.error[1])
            yield outcome
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    # forkserver: a worker is not a fork of this process, which holds the dataset's lock (a
    # worker left running by a killed export would hold it too) and may run pyarrow's
    # threads. The server imports what the workers need once; each worker is a fork of it.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["psrec.analyzer.parquet", "pyarrow.parquet", "numpy"])
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=context)
    try:
        futures = [pool.submit(_run, job) for job in jobs]
        for job, future in zip(jobs, futures):
            try:
                outcome = future.result()
            except BrokenProcessPool:
                raise PsrecError(f"a process exporting {job.files[0]} was killed (out of "
                                 "memory?)", help="export it alone; the dataset is as it "
                                                  "was") from None
            if outcome.error is not None:
                raise PsrecError(outcome.error[0], help=outcome.error[1])
            yield outcome
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


@register
class ParquetExporter(Reporter):
    name = "parquet"
    description = "a Parquet dataset of every sample, for DuckDB, Dask or Spark"
    command = "export"
    flag = Option(("--parquet",), help="Write every sample of the recordings (several files "
                  "or folders may be given: windows, snapshots and flight recordings of one "
                  "recording are written once) as a Parquet dataset (a folder, default "
                  "RECORDING.parquet; spec/parquet.md), partitioned by host and date, for "
                  "DuckDB, Dask or Spark; --force adds to a dataset what it does not hold. "
                  "Needs pyarrow.")
    many = True
    binary = True

    def write_folder(self, recordings: list[str], out_dir: str, force: bool) -> str:
        import click

        try:
            written = write_dataset(recordings_in(recordings), out_dir, force)
        except MemoryError:
            raise _out_of_memory(recordings[0]) from None
        for w in written.warnings:
            click.echo(f"psrec: warning: {w}", err=True)
        return written.summary(out_dir)
