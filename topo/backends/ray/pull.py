"""New complete lines of log files, read when the launcher asks (Ray workers side).

The ray backend pulls output: the launcher calls an actor's method, which answers with
what each followed file gained since the last call. Files may appear after they are
followed (an executable creates its log when it starts); what a file held before it
was followed is skipped (an earlier agent on the node sent it already).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import BinaryIO

CHUNK = 1 << 20  # at most this much of one file per read
BUDGET = 8 << 20  # at most this much in all per read (the rest comes with the next)


class PullTail:
    """Label -> file; ``read`` returns each file's new complete lines."""

    def __init__(self) -> None:
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
        """Label -> the new complete lines of its file (``final``: everything left, even
        a last line without its newline); labels with nothing new are left out."""
        out: dict[str, str] = {}
        with self._lock:
            labels = list(self._files)
            self._turn = (self._turn + 1) % max(1, len(labels))
            budget = BUDGET
            for label in labels[self._turn :] + labels[: self._turn]:
                if budget <= 0 and not final:
                    break
                path = self._files[label]
                handle = self._handles.get(label)
                if handle is None:
                    try:
                        handle = self._handles[label] = open(path, "rb")
                    except FileNotFoundError:
                        continue
                    handle.seek(self._skip.pop(label, 0))
                where = handle.tell()
                data = handle.read(CHUNK)
                cut = len(data) if final else data.rfind(b"\n") + 1
                if not cut and len(data) == CHUNK:  # one line longer than a chunk: split
                    cut = len(data)
                handle.seek(where + cut)
                if cut:
                    out[label] = data[:cut].decode("utf-8", "replace")
                    budget -= cut
        return out

    def close(self) -> None:
        """Close every file."""
        with self._lock:
            for handle in self._handles.values():
                handle.close()
            self._handles.clear()
