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
    """``sys.stdout`` (or ``sys.stderr``) as it is at each write, with the spaces at the
    end of every line dropped when it is not a terminal."""

    def __init__(self, stderr: bool = False) -> None:
        self._stderr = stderr

    @property
    def stream(self) -> TextIO:
        """The stream written to now (a test or a redirection may have replaced it)."""
        return sys.stderr if self._stderr else sys.stdout

    def write(self, text: str) -> int:
        """Write ``text``; piped, without the spaces before each of its newlines."""
        stream = self.stream
        isatty = getattr(stream, "isatty", None)
        stream.write(text if isatty and isatty() else _TRAILING.sub("", text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def console(stderr: bool = False, **kwargs: Any) -> Console:
    """A rich console on stdout (or stderr); piped, its lines end without spaces.
    ``kwargs`` go to rich's ``Console``."""
    return Console(file=TrimmedStream(stderr), **kwargs)  # type: ignore[arg-type]
