"""Errors for the user: a message, where it comes from (file:line:col) and a hint.

Every stage raises :class:`TopoError` with one or more diagnostics; the CLI prints
them with the offending YAML line and a caret, and exits 1. No stage lets a
Python traceback reach the user for bad input.

This module is the bottom layer: every stage (load, IR, compile, backends) may import
it, and it imports nothing from topo and no third-party module at import time (rich
is imported only by :func:`render_diagnostics`).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from rich.console import Console

Severity = Literal["error", "warning"]


@dataclass(frozen=True, slots=True)
class SourcePos:
    """Where something was written: file, 1-based line and column."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"


def suggest(word: str, choices: Collection[str]) -> str | None:
    """A 'did you mean' hint for a misspelt name, if one is close enough."""
    close = difflib.get_close_matches(word, sorted(choices), n=1, cutoff=0.6)
    return f"did you mean '{close[0]}'?" if close else None


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One problem found in a topology."""

    message: str
    pos: SourcePos | None = None
    hint: str | None = None
    severity: Severity = "error"

    def headline(self) -> str:
        """``file:line:col: error: message`` (no colour)."""
        where = f"{self.pos}: " if self.pos else ""
        return f"{where}{self.severity}: {self.message}"


class TopoError(Exception):
    """Bad input: carries every diagnostic found so far."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics: tuple[Diagnostic, ...] = tuple(diagnostics)
        super().__init__("\n".join(d.headline() for d in self.diagnostics))

    @classmethod
    def one(cls, message: str, pos: SourcePos | None = None, hint: str | None = None) -> TopoError:
        """An error with a single diagnostic."""
        return cls([Diagnostic(message, pos, hint)])


@lru_cache(maxsize=64)
def _lines(file: str) -> tuple[str, ...]:
    try:
        with open(file, encoding="utf-8", errors="replace") as fh:
            return tuple(fh.read().splitlines())
    except OSError:
        return ()


def snippet(pos: SourcePos) -> list[str]:
    """The source line at ``pos`` with a caret under the column, or nothing if unreadable."""
    lines = _lines(pos.file)
    if not 1 <= pos.line <= len(lines):
        return []
    text = lines[pos.line - 1].expandtabs(1)
    gutter = f"{pos.line:>4} | "
    return [gutter + text, " " * (len(gutter) + max(pos.col - 1, 0)) + "^"]


def render_diagnostics(diagnostics: Iterable[Diagnostic], console: Console) -> None:
    """Print diagnostics the way compilers do: position, message, source line, caret, hint."""
    from rich.markup import escape

    diagnostics = list(diagnostics)
    for d in diagnostics:
        colour = "red" if d.severity == "error" else "yellow"
        where = f"[bold]{escape(str(d.pos))}:[/bold] " if d.pos else ""
        console.print(f"{where}[{colour}]{d.severity}:[/{colour}] {escape(d.message)}")
        if d.pos:
            for line in snippet(d.pos):
                console.print(f"[dim]{escape(line)}[/dim]")
        if d.hint:
            console.print(f"  [cyan]hint:[/cyan] {escape(d.hint)}")
    errors = sum(1 for d in diagnostics if d.severity == "error")
    if errors > 1:
        console.print(f"[red]{errors} errors[/red]")
