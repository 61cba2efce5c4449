"""Styled spans as ANSI escape codes, for what is printed without rich (``topo status``
imports little). The style names are rich's ("bold red", "bright_cyan", "dim"), so
the same lines can be drawn by rich in the live view. Colour follows rich's rules:
none with ``NO_COLOR``, always with ``FORCE_COLOR``, else on a terminal only."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TextIO

_ATTRIBUTES = {"bold": 1, "dim": 2, "italic": 3, "underline": 4}
_COLOURS = ("black", "red", "green", "yellow", "blue", "magenta", "cyan", "white")


def _code(word: str) -> int | None:
    if word in _ATTRIBUTES:
        return _ATTRIBUTES[word]
    if word in _COLOURS:
        return 30 + _COLOURS.index(word)
    if word.startswith("bright_") and word[7:] in _COLOURS:
        return 90 + _COLOURS.index(word[7:])
    return None


def sgr(style: str) -> str:
    """The escape sequence that starts ``style`` ("" for no or an unknown style)."""
    codes = [c for c in (_code(w) for w in style.split()) if c is not None]
    return f"\x1b[{';'.join(map(str, codes))}m" if codes else ""


def use_colour(stream: TextIO) -> bool:
    """Whether to colour what is written to ``stream``."""
    if os.environ.get("NO_COLOR"):
        return False
    if os.environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and os.environ.get("TERM") != "dumb"


def paint(spans: Iterable[tuple[str, str]], colour: bool) -> str:
    """The spans as one string, with escape codes when ``colour``."""
    if not colour:
        return "".join(text for text, _ in spans)
    out = []
    for text, style in spans:
        start = sgr(style)
        out.append(f"{start}{text}\x1b[0m" if start and text else text)
    return "".join(out)
