"""New complete lines of log files, read on a host for the launcher (an agent's side).

An agent follows the log file of every executable it forks, and its fork server's own
output; each ``read`` answers what each file gained since the last one, in complete
lines. The ray agent answers them when the launcher polls it; the stream agent (ssh)
sends them as they come. Files may appear after they are followed (an executable
creates its log when it starts); what a file held before it was followed is skipped
(an earlier agent on the host sent it already). Standard library only.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20  # at most this much of one file per read
BUDGET = 8 << 20  # at most this much in all per read (the rest comes with the next)
SERVER_LOG = ":forkserver"  # the label of the fork server's own output (no id has a colon)


class LogFollower:
    """Label -> file; ``read`` returns each file's new complete lines."""

    def __init__(self, chunk: int | None = None) -> None:
        self._chunk = chunk  # None: CHUNK (read when used, so that tests can lower it)
        self._files: dict[str, Path] = {}
        self._handles: dict[str, BinaryIO] = {}
        self._skip: dict[str, int] = {}
        self._turn = 0  # where the next read starts: a chatty file cannot starve the rest
        self._lock = threading.Lock()

    def follow(self, label: str, path: Path, from_end: bool = True) -> None:
        """Follow ``path`` as ``label`` (once; later calls are ignored), from its current
        end (``from_end``) or its start."""
        with self._lock:
            if label in self._files:
                return
            self._files[label] = path
            try:
                self._skip[label] = path.stat().st_size if from_end else 0
            except FileNotFoundError:
                self._skip[label] = 0

    def read(self, final: bool = False) -> dict[str, str]:
        """Label -> the new complete lines of its file, at most a chunk of each and a
        budget in all (``final``: everything left, even a last line without its
        newline); labels with nothing new are left out."""
        chunk = self._chunk or CHUNK
        out: dict[str, str] = {}
        with self._lock:
            labels = list(self._files)
            self._turn = (self._turn + 1) % max(1, len(labels))
            budget = BUDGET
            for label in labels[self._turn :] + labels[: self._turn]:
                if budget <= 0 and not final:
                    break
                handle = self._open(label)
                if handle is None:
                    continue
                text = b""
                while True:
                    where = handle.tell()
                    data = handle.read(chunk)
                    cut = len(data) if final else data.rfind(b"\n") + 1
                    if not cut and len(data) == chunk:  # one line longer than a chunk: split
                        cut = len(data)
                    handle.seek(where + cut)
                    text += data[:cut]
                    if not final or len(data) < chunk:
                        break
                if text:
                    out[label] = text.decode("utf-8", "replace")
                    budget -= len(text)
        return out

    def _open(self, label: str) -> BinaryIO | None:
        """``label``'s file, opened at where reading starts (None: not there yet)."""
        handle = self._handles.get(label)
        if handle is None:
            try:
                handle = self._handles[label] = open(self._files[label], "rb")
            except FileNotFoundError:
                return None
            handle.seek(self._skip.pop(label, 0))
        return handle

    def close(self) -> None:
        """Close every file."""
        with self._lock:
            for handle in self._handles.values():
                handle.close()
            self._handles.clear()
