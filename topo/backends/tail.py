"""Following node log files for the live view, bounded in memory and in lag.

``LogTailer`` reads each file in chunks of ``CHUNK`` bytes, at most ``ROUND`` bytes of
one file at a time, and hands every complete line to ``emit``. A reader that falls
behind (more than ``MAX_BEHIND`` bytes, or for longer than ``MAX_LAG_S``) skips ahead
to the file's last ``TAIL_AFTER_SKIP`` bytes and says so in one line::

    [learner: 37.2 MB of output skipped; the whole output is in logs/learner.log]

Lines are relayed whole (a skip resumes at the start of a line); a line longer than
``MAX_LINE`` is cut and marked. A file that is rotated (``topo.backends.rotation``)
is read to its end and then followed under its name. What ``append`` adds (a traceback
shown apart) is never relayed, and ``append`` never waits for the relay: the stop of a
run does not depend on how fast its output is shown. ``close`` relays at most
``FINAL_BYTES`` of each file's rest and gives up on an ``emit`` stuck for ``CLOSE_S``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from topo.backends.rotation import LogLimit, make_room, write_all
from topo.rundir.lines import display_line

CHUNK = 64 << 10  # one read
ROUND = 256 << 10  # at most this much of one file before the others get their turn
MAX_LINE = 64 << 10  # a longer line is cut
MAX_BEHIND = 8 << 20  # more than this not yet relayed: skip ahead
MAX_LAG_S = 2.0  # behind for longer than this: skip ahead
TAIL_AFTER_SKIP = 16 << 10  # after a skip, what is relayed of the file's end
FINAL_BYTES = 64 << 10  # at close, at most this much of each file's rest (its last lines)
CLOSE_S = 2.0  # at close, how long a relay stuck in emit is waited for


def size_text(n: int) -> str:
    """A byte count for people: ``512 bytes``, ``16.4 kB``, ``37.2 MB``, ``1.3 GB``."""
    for scale, unit in ((1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} bytes"


def _inode(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


class _Followed:
    """One followed file: its handle, the partial last line, what was skipped."""

    def __init__(self, label: str, path: Path) -> None:
        self.label = label
        self.path = path
        self.handle: BinaryIO = open(path, "rb")  # closed by LogTailer.close
        self.handle.seek(0, os.SEEK_END)
        self.partial = b""
        self.behind_since: float | None = None
        self.skipped = 0  # bytes skipped, not yet said
        self.resync = False  # after a skip: drop bytes up to the next line start
        self.cutting = False  # the current line was cut: drop the rest of it
        self.hidden: list[tuple[tuple[int, int], int, int]] = []  # (inode, start, end)
        self.pending: list[bytes] = []  # whole lines read but not shown when close came

    def where(self) -> str:
        """``logs/<name>.log``: the file as the run directory names it."""
        return f"{self.path.parent.name}/{self.path.name}"


class LogTailer:
    """Follows log files and calls ``emit(label, line)`` for every complete new line
    (see the module's docstring for the bounds). ``limit`` caps what ``append`` adds."""

    def __init__(
        self,
        files: dict[str, Path],
        emit: Callable[[str, str], None],
        interval: float = 0.1,
        limit: LogLimit | None = None,
        stamps: bool = False,
    ) -> None:
        self._files = files
        self._stamps = stamps  # keep each line's timestamp (``topo logs -f -t``)
        self._emit = emit
        self._interval = interval
        self._limit = limit
        self._followed: dict[str, _Followed] = {}
        self._lock = threading.Lock()  # the relay: one round at a time
        self._hidden_lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="topo-log-tail", daemon=True)

    def start(self) -> None:
        """Start following (from the current end of each file)."""
        for label, path in self._files.items():
            self._followed[label] = _Followed(label, path)
        self._thread.start()

    def follow(self, label: str, path: Path) -> None:
        """Follow one more file from its start (made if missing): a node added to the
        running program (``topo apply``)."""
        with self._lock:
            if label in self._followed or self._closed.is_set():
                return
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            os.close(fd)
            followed = _Followed(label, path)
            followed.handle.seek(0)
            self._followed[label] = followed
            self._files[label] = path

    # -- the relay ---------------------------------------------------------------
    def poll(self, final: bool = False) -> bool:
        """One round over every file; True when some file has more to read now."""
        more = False
        with self._lock:
            for f in self._followed.values():
                try:
                    more |= self._round(f, FINAL_BYTES if final else ROUND, final)
                except (OSError, ValueError):  # a file closed under us, or gone
                    continue
        return more

    def _round(self, f: _Followed, budget: int, final: bool) -> bool:
        self._follow_rotation(f, final)
        handle = f.handle
        size = os.fstat(handle.fileno()).st_size
        pos = handle.tell()
        if size < pos:  # truncated: start again from its beginning
            handle.seek(0)
            pos, f.partial, f.resync, f.cutting = 0, b"", False, False
        if final and f.pending:
            self._show_pending(f, budget - min(size - pos, budget + 1))
        now = time.monotonic()
        lagging = f.behind_since is not None and now - f.behind_since > MAX_LAG_S
        if size - pos > (budget if final else MAX_BEHIND) or (lagging and size - pos > ROUND):
            self._skip(f, size)
        done = 0
        # A closing tailer's relay stops between chunks, so close() comes to its final
        # round (the end of each file) soon even when the listeners are slow.
        while done < budget and (final or not self._closed.is_set()):
            at = handle.tell()
            data = handle.read(min(CHUNK, budget - done))
            if not data:
                break
            done += len(data)
            self._feed(f, self._unhidden(f, data, at), final)
        if final:
            self._flush_partial(f)
        if f.skipped and not f.resync:
            self._say_skipped(f)
        more = handle.tell() < os.fstat(handle.fileno()).st_size
        f.behind_since = (f.behind_since or now) if more else None
        return more

    def _skip(self, f: _Followed, size: int) -> None:
        """Jump to the last ``TAIL_AFTER_SKIP`` bytes, at the start of a line."""
        handle = f.handle
        pos = handle.tell()
        target = max(pos, size - TAIL_AFTER_SKIP)
        f.skipped += target - pos + len(f.partial)
        f.partial, f.cutting = b"", False
        f.behind_since = None
        if target > 0:
            handle.seek(target - 1)
            f.resync = handle.read(1) != b"\n"
        handle.seek(target)

    def _feed(self, f: _Followed, data: bytes, final: bool = False) -> None:
        """Relay the complete lines of ``data`` (what follows ``f.partial``); once the
        tailer closes, the relay stops between two lines and keeps the rest for the final
        round (``_show_pending``), so ``close`` shows the end of each file soon however
        slow the listeners are, and the last lines read are not lost."""
        if f.resync or f.cutting:
            newline = data.find(b"\n")
            if newline < 0:
                f.skipped += len(data) if f.resync else 0
                return
            f.skipped += newline + 1 if f.resync else 0
            data = data[newline + 1 :]
            f.resync = f.cutting = False
        if f.skipped:
            self._say_skipped(f)
        *lines, rest = (f.partial + data).split(b"\n")
        for i, line in enumerate(lines):
            if not final and self._closed.is_set():
                f.pending.extend(lines[i:])
                break
            self._line(f.label, line)
        if len(rest) > MAX_LINE:
            self._line(f.label, rest[:MAX_LINE], f" [… line cut at {size_text(MAX_LINE)}]")
            rest, f.cutting = b"", True
        f.partial = rest

    def _line(self, label: str, line: bytes, tail: str = "") -> None:
        shown = display_line(line.decode("utf-8", "replace").rstrip("\r"), self._stamps)
        if shown is not None:
            self._emit(label, shown + tail)

    def _show_pending(self, f: _Followed, room: int) -> None:
        """At close: the lines read before it and not shown yet, the newest that fit in
        ``room`` bytes (the older ones count as skipped, said first)."""
        kept: list[bytes] = []
        for line in reversed(f.pending):
            if len(line) + 1 > room:
                break
            room -= len(line) + 1
            kept.append(line)
        f.skipped += sum(len(line) + 1 for line in f.pending[: len(f.pending) - len(kept)])
        f.pending = []
        if f.skipped and kept:  # (else the skip goes on: said once, where it ends)
            self._say_skipped(f)
        for line in reversed(kept):
            self._line(f.label, line)

    def _say_skipped(self, f: _Followed) -> None:
        self._emit(
            f.label,
            f"[{f.label}: {size_text(f.skipped)} of output skipped; "
            f"the whole output is in {f.where()}]",
        )
        f.skipped = 0

    def _flush_partial(self, f: _Followed) -> None:
        """A last line without its newline (the end of a file, or of the run)."""
        if f.partial and not (f.resync or f.cutting):
            self._line(f.label, f.partial)
        f.partial, f.resync, f.cutting = b"", False, False

    def _follow_rotation(self, f: _Followed, final: bool = False) -> None:
        """Once a rotated file is read to its end, go on with the new file of its name
        (at close at once: what is shown last is the end of the output)."""
        try:
            now = os.stat(f.path)
        except FileNotFoundError:  # between the rename and the new file
            return
        mine = os.fstat(f.handle.fileno())
        if _inode(now) == _inode(mine):
            return
        rest = mine.st_size - f.handle.tell()
        if rest > 0 and not final:
            return
        if rest > 0:  # the old file's unread end, and the line begun before it: skipped
            f.skipped += rest + len(f.partial) + sum(len(line) + 1 for line in f.pending)
            f.partial, f.resync, f.cutting, f.pending = b"", False, False, []
        if f.pending:  # shown after them, with what fits of the new file (_show_pending)
            if f.partial and not (f.resync or f.cutting):
                f.pending.append(f.partial)
            f.partial, f.resync, f.cutting = b"", False, False
        self._flush_partial(f)
        new = open(f.path, "rb")  # closed by LogTailer.close
        f.handle.close()
        f.handle = new
        with self._hidden_lock:
            f.hidden = [h for h in f.hidden if h[0] == _inode(now)]

    def _unhidden(self, f: _Followed, data: bytes, start: int) -> bytes:
        """``data`` (read at ``start``) without what ``append`` wrote."""
        if not f.hidden:
            return data
        ino = _inode(os.fstat(f.handle.fileno()))
        end = start + len(data)
        out, at = [], start
        with self._hidden_lock:
            for h_ino, a, b in sorted(f.hidden, key=lambda h: h[1]):
                if h_ino != ino or b <= at or a >= end:
                    continue
                out.append(data[at - start : max(a, at) - start])
                at = min(b, end)
            f.hidden = [h for h in f.hidden if h[0] != ino or h[2] > end]
        out.append(data[at - start :])
        return b"".join(out)

    # -- the rest ------------------------------------------------------------------
    def append(self, label: str, text: str) -> None:
        """Add ``text`` to ``label``'s file without emitting it (e.g. a traceback shown
        separately); does not wait for the relay."""
        f = self._followed.get(label)
        if f is None:
            return
        data = (text if text.endswith("\n") else text + "\n").encode("utf-8", "replace")
        make_room(f.path, len(data), self._limit)
        fd = os.open(f.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            with self._hidden_lock:
                write_all(fd, data)
                end = os.lseek(fd, 0, os.SEEK_CUR)
                f.hidden.append((_inode(os.fstat(fd)), end - len(data), end))
        finally:
            os.close(fd)

    def _loop(self) -> None:
        more = False
        while not self._closed.wait(0 if more else self._interval):
            more = self.poll()

    def close(self) -> None:
        """Emit what is left (at most ``FINAL_BYTES`` of each file) and stop following."""
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(CLOSE_S)
        if not self._lock.acquire(timeout=0 if self._thread.is_alive() else CLOSE_S):
            return  # emit is stuck (nobody reads the output): leave the rest in the files
        self._lock.release()
        self.poll(final=True)
        with self._lock:
            for f in self._followed.values():
                f.handle.close()
