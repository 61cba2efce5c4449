"""A node's metric figures as the live table, ``topo status`` and the log lines show
them: the key figures first (``topo.runs.figures``), each as a name and a value.

A table cell fits its figures to its width (``fit``): every figure with its full name
when there is room, then short names (``episode_return`` -> ``return``, unless another
figure of the node has the same short name), then fewer figures; the first figure's
value is always shown whole, its name is cut first. Standard library only: ``topo
status`` imports it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from topo.cli.cells import cell_len, cut
from topo.runs.figures import STAMPS, rank_keys
from topo.runs.node_status import LIMIT_KEYS

SEP = " · "
TABLE_FIGURES = 3  # figures a table cell shows at most
LINE_FIGURES = 6  # figures a metrics log line (and topo status --wide) shows at most
_SUFFIXES = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))
_WORDS = re.compile(r"[_./:\s-]+")


def format_number(value: float) -> str:
    """A figure in 3-4 significant digits, large ones with k/M/G/T: 187.3, 2.1k, 12.5M."""
    if isinstance(value, int) and abs(value) < 1000:
        return str(value)
    size = abs(value)
    for scale, suffix in _SUFFIXES:
        if size >= scale * 0.9995:  # 999.96 rounds to 1k, not 1e+03
            text = f"{value / scale:.3g}"
            return f"{text}{suffix}"
    return f"{value:.4g}"


@dataclass(frozen=True)
class Figure:
    """One figure: its full name (``steps/s`` for ``steps_per_s``), its short name and
    its value as text."""

    name: str
    short: str
    value: str

    def text(self, short: bool = False) -> str:
        """``name value`` (``short``: with the short name)."""
        return f"{self.short if short else self.name} {self.value}"


def figures(values: dict[str, Any], limit: int | None = TABLE_FIGURES) -> list[Figure]:
    """A node's latest figures, key figures first (return, reward, loss, steps per
    second, steps), numbers before other values; at most ``limit`` (None: all). A
    limiter's bookkeeping (``limit_key``, ``limit``, ``eta_s``) is left out: the table's
    title shows it."""
    hidden = (*STAMPS, *LIMIT_KEYS) if "limit_key" in values else STAMPS
    keys = rank_keys([k for k in values if k not in hidden])
    numbers = [k for k in keys if _is_number(values[k])]
    ordered = [*numbers, *(k for k in keys if k not in numbers)]
    shorts = [_short(k) for k in ordered]
    taken = [shorts.count(s) > 1 for s in shorts]  # shared short names stay full
    found = []
    for key, short, shared in zip(ordered, shorts, taken, strict=True):
        value = values[key]
        text = format_number(value) if _is_number(value) else _plain(str(value))[:16]
        name = _full(key)
        found.append(Figure(name, name if shared else short, text))
    return found if limit is None else found[:limit]


def key_figures(values: dict[str, Any], limit: int = TABLE_FIGURES) -> str:
    """A node's figures in a few words with their full names: ``episode_return 187.3 ·
    steps/s 2.1k``."""
    return SEP.join(f.text() for f in figures(values, limit))


def fit(found: list[Figure], width: int | None) -> str:
    """The most the figures say within ``width`` cells (None: all, full names): more
    figures first, full names before short ones; when not even the first figure's short
    form fits, its name is cut and its value kept whole."""
    if not found:
        return ""
    if width is None:
        return SEP.join(f.text() for f in found)
    for count in range(len(found), 0, -1):
        for short in (False, True):
            text = SEP.join(f.text(short) for f in found[:count])
            if cell_len(text) <= width:
                return text
    first = found[0]
    room = width - cell_len(first.value) - 1
    if room >= 2:
        return f"{cut(first.short, room)} {first.value}"
    return cut(first.value, width)


def compact(found: list[Figure]) -> int:
    """The width of every figure with its short name."""
    return cell_len(SEP.join(f.text(short=True) for f in found))


def narrowest(found: list[Figure]) -> int:
    """The width of the first figure with its short name: a cell narrower than this
    cuts a name."""
    return cell_len(found[0].text(short=True)) if found else 0


def _full(key: str) -> str:
    return key.replace("_per_s", "/s")


def _short(key: str) -> str:
    """The last word of a key (``episode_return`` -> ``return``, ``actor_steps_per_s`` ->
    ``steps/s``); a last word of one or two letters keeps the word before it
    (``elapsed_s``)."""
    rate = key.endswith("_per_s")
    words = [w for w in _WORDS.split(key[: -len("_per_s")] if rate else key) if w]
    if not words:
        return _full(key)
    short = words[-1]
    if len(short) < 3 and len(words) > 1:
        short = f"{words[-2]}_{short}"
    return f"{short}/s" if rate else short


def _plain(text: str) -> str:
    return " ".join(text.split())


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
