"""The rich consoles commands print tables and panels through. On a terminal they are
rich's own; piped, no line ends in spaces: rich pads every table cell (and a table's
title) to its column's width, and a pipe is read by ``grep``, ``awk`` and diffs, where
trailing spaces are noise. What a node printed goes through other consoles, untouched."""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

from rich.console import Console

_TRAILING = re.compile(r"[ \t]+(?=\n)")


class TrimmedStream:
    """A text stream that drops the spaces at the end of every line written to it (and
    passes everything else to the stream it wraps)."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        """Write ``text`` without the spaces before each of its newlines."""
        self._stream.write(_TRAILING.sub("", text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def console(stderr: bool = False, **kwargs: Any) -> Console:
    """A rich console on stdout (or stderr) as it is now; piped, its lines end without
    spaces. ``kwargs`` go to rich's ``Console``."""
    stream = sys.stderr if stderr else sys.stdout
    isatty = getattr(stream, "isatty", None)
    if not (isatty and isatty()):
        stream = TrimmedStream(stream)  # type: ignore[assignment]
    return Console(file=stream, **kwargs)
