"""Text measured in terminal cells, for tables drawn without rich (``topo status``
imports little): a wide character (CJK, most emoji) takes two cells, a combining mark
none. Also what a node printed, made safe to draw in a cell: no escape sequences or
control characters of its own."""

from __future__ import annotations

import re
import unicodedata

ELLIPSIS = "…"
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]|[\x00-\x1f\x7f]")


def char_len(char: str) -> int:
    """The cells one character takes."""
    if char < "\u0300":  # ASCII and Latin: the common case, quickly
        return 1
    if unicodedata.combining(char) or char in "\u200b\u200c\u200d\ufe0f":
        return 0
    return 2 if unicodedata.east_asian_width(char) in "WF" else 1


def cell_len(text: str) -> int:
    """The cells ``text`` takes on a terminal."""
    if text.isascii():
        return len(text)
    return sum(char_len(c) for c in text)


def cut(text: str, width: int) -> str:
    """``text`` in at most ``width`` cells, ending in ``…`` when it was cut."""
    if cell_len(text) <= width:
        return text
    if width <= 0:
        return ""
    kept, used = [], 0
    for char in text:
        size = char_len(char)
        if used + size > width - 1:
            break
        kept.append(char)
        used += size
    return "".join(kept) + ELLIPSIS


def pad(text: str, width: int) -> str:
    """``text`` cut or padded with spaces to exactly ``width`` cells."""
    text = cut(text, width)
    return text + " " * (width - cell_len(text))


def clean(text: str) -> str:
    """A line of a node's output fit for a cell: tabs as spaces, escape sequences and
    other control characters dropped."""
    return _CONTROL.sub("", text.replace("\t", "    "))
