"""Size caps of node log files: rotation by whoever writes them.

A log file over its cap is renamed ``<name>.1`` (``.1`` becomes ``.2`` and so on, the
oldest beyond ``keep`` is removed) and its writer goes on in a new, empty ``<name>``:
a node's output takes at most ``(keep + 1) * max_bytes`` of disk. The writer rotates
because only the writer can move its own writes to the new file:

* a process backend's child (``RotatingFds``): fds 1 and 2 point at the file, so C
  libraries write there too; Python-level writes check the size every
  ``CHECK_EVERY`` bytes and a thread checks it every ``CHECK_INTERVAL_S`` (what C code
  writes between two checks can overshoot the cap by that much);
* a file opened by path (``RotatingFile``: the threads backend's per-node files,
  colocated nodes' own files).

Several processes may write one file (a node's forked children inherit its fds). A
writer whose file was already rotated by another only follows it to the new file;
readers (``topo.backends.tail``) follow the same way, by the file's inode.
"""

from __future__ import annotations

import io
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from topo.rundir.layout import rotated_path

DEFAULT_LOG_MAX_MB = 100.0  # a run's default cap of each node log file
DEFAULT_LOG_KEEP = 3  # and how many rotated files it keeps
CHECK_EVERY = 1 << 20  # Python-level writes: look at the file's size after this many bytes
# (or a 16th of the cap if that is less)
CHECK_INTERVAL_S = 0.1  # and a thread looks this often (C-level writes)


@dataclass(frozen=True)
class LogLimit:
    """The cap of each node log file (``max_bytes``) and how many rotated files are kept."""

    max_bytes: int = int(DEFAULT_LOG_MAX_MB * (1 << 20))
    keep: int = DEFAULT_LOG_KEEP

    @classmethod
    def of(cls, max_mb: float | None, keep: int) -> LogLimit | None:
        """From the run settings (``--log-max-mb``, ``--log-keep``); None: no cap."""
        if not max_mb or max_mb <= 0:
            return None
        return cls(max(int(max_mb * (1 << 20)), 1), max(int(keep), 0))


def check_step(limit: LogLimit) -> int:
    """How many bytes written through Python between two looks at the file's size."""
    return max(min(CHECK_EVERY, limit.max_bytes // 16), 1024)


def rotate(path: Path, keep: int) -> None:
    """Shift ``path`` to ``path.1`` (``.1`` to ``.2`` ... the one past ``keep`` goes);
    ``keep`` 0 removes it. A file that is not there is skipped."""
    try:
        if keep <= 0:
            os.unlink(path)
            return
        for n in range(keep - 1, 0, -1):
            older = rotated_path(path, n)
            if older.exists():
                os.replace(older, rotated_path(path, n + 1))
        os.replace(path, rotated_path(path, 1))
    except FileNotFoundError:
        pass


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _open_append(path: Path) -> int:
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)


class RotatingFds:
    """Keeps fds (1 and 2 of a child) on ``path``, rotating it past ``limit.max_bytes``."""

    def __init__(self, path: Path, limit: LogLimit, fds: tuple[int, ...] = (1, 2)) -> None:
        self.path = path
        self.limit = limit
        self.fds = fds
        self._since_check = 0
        self._lock = threading.Lock()

    def written(self, n: int) -> None:
        """``n`` more bytes were written through Python: check the size now and then."""
        self._since_check += n
        if self._since_check >= check_step(self.limit):
            try:
                self.check()
            except OSError:  # e.g. the run directory was removed: a print must not fail
                pass

    def check(self) -> None:
        """Rotate if the file is over its cap; follow a rotation made by another writer."""
        self._since_check = 0
        try:
            size = os.fstat(self.fds[0]).st_size
        except OSError:
            return
        if size < self.limit.max_bytes and _same_file(self.fds[0], self.path):
            return
        with self._lock:
            if not _same_file(self.fds[0], self.path):  # another writer rotated it: follow
                self._point_at(_open_append(self.path))
                return
            if os.fstat(self.fds[0]).st_size < self.limit.max_bytes:
                return
            # The fds move to the new file before the full one is renamed: what other
            # threads write meanwhile (rename releases the GIL) goes to the new file, not
            # past the cap of the rotated one.
            fresh = self.path.with_name(f".{self.path.name}.{os.getpid()}.new")
            self._point_at(
                os.open(fresh, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o600)
            )
            rotate(self.path, self.limit.keep)
            os.replace(fresh, self.path)

    def _point_at(self, fd: int) -> None:
        """Make every fd of ``self.fds`` a copy of ``fd`` (then closed)."""
        for target in self.fds:
            os.dup2(fd, target)
        os.close(fd)

    def watch(self) -> None:
        """A daemon thread that checks every ``CHECK_INTERVAL_S`` (output C code writes)."""

        def loop() -> None:
            event = threading.Event()
            while not event.wait(CHECK_INTERVAL_S):
                try:
                    self.check()
                except OSError:  # e.g. the run directory was removed: nothing to cap
                    pass

        threading.Thread(target=loop, name="topo-log-rotate", daemon=True).start()


class RotatingFile(io.TextIOBase):
    """A text file opened by path for appending (line-buffered) that rotates itself past
    ``limit.max_bytes`` (``limit`` None: never)."""

    def __init__(self, path: Path, limit: LogLimit | None) -> None:
        self.path = path
        self.limit = limit
        self._lock = threading.Lock()
        self._since_check = 0
        self._file = self._open()

    def _open(self) -> io.TextIOWrapper:
        return open(self.path, "a", buffering=1, encoding="utf-8", errors="replace")

    def write(self, s: str) -> int:
        with self._lock:
            self._file.write(s)
            if self.limit is not None:
                self._since_check += len(s)
                if self._since_check >= check_step(self.limit):
                    try:
                        self._check(self.limit)
                    except OSError:  # cannot rotate or reopen: go on in the file we have
                        if self._file.closed:
                            self._file = self._open()
        return len(s)

    def _check(self, limit: LogLimit) -> None:
        self._since_check = 0
        self._file.flush()
        fd = self._file.fileno()
        if _same_file(fd, self.path):
            if os.fstat(fd).st_size < limit.max_bytes:
                return
            rotate(self.path, limit.keep)
        self._file.close()
        self._file = self._open()

    def flush(self) -> None:
        with self._lock:
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()

    def fileno(self) -> int:
        return self._file.fileno()

    def writable(self) -> bool:
        return True

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"


def make_room(path: Path, n: int, limit: LogLimit | None) -> None:
    """Rotate ``path`` if ``n`` more bytes would take it past its cap."""
    if limit is None:
        return
    try:
        if path.stat().st_size + n > limit.max_bytes:
            rotate(path, limit.keep)
    except FileNotFoundError:
        pass


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is written."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def append_capped(path: Path, data: bytes, limit: LogLimit | None) -> None:
    """Append ``data`` to ``path``, rotating it first if it would pass its cap (output
    gathered by the launcher from other hosts)."""
    make_room(path, len(data), limit)
    fd = _open_append(path)
    try:
        write_all(fd, data)
    finally:
        os.close(fd)
