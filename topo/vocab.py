"""Words every stage shares, defined below all of them: the IR, the node kinds and the
loader use them without importing one another."""

from __future__ import annotations

import re
from typing import Literal

KindName = str  # a name in the node-kind catalogue (topo.kinds), checked by the compiler
EdgeVia = Literal["ref", "round_robin", "fallback", "source", "primary"]

# A memory size as written in a topology: a number of bytes, or a number and a unit.
SIZE_UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "t": 10**12,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")


def parse_size(text: str | int) -> int:
    """``"4GiB"``, ``"512 MB"``, ``1073741824`` -> bytes. ValueError for anything else."""
    if isinstance(text, bool):
        raise ValueError("expected a size such as 4GiB or 512MiB, got a boolean")
    if isinstance(text, int):
        value, unit = float(text), ""
    else:
        m = _SIZE.match(text)
        if m is None or m.group(2).lower() not in SIZE_UNITS:
            raise ValueError(
                f"{text!r} is not a size: write a number of bytes or a number with a unit "
                "(B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), e.g. 4GiB"
            )
        value, unit = float(m.group(1)), m.group(2).lower()
    size = int(value * SIZE_UNITS[unit])
    if size <= 0:
        raise ValueError(f"a size must be more than 0 bytes, got {text!r}")
    return size


def format_size(size: int) -> str:
    """Bytes as the user would write them: ``4 GiB``, ``1.5 GiB``, ``300 MB``, ``100 B``
    (the largest unit the size is a whole -- or, binary, a quarter -- multiple of)."""
    units = [("KB", 10**3, 10**3), ("MB", 10**6, 10**6), ("GB", 10**9, 10**9)]
    units += [("TB", 10**12, 10**12)]
    units += [(u, 2**e, 2**e // 4) for u, e in (("KiB", 10), ("MiB", 20), ("GiB", 30), ("TiB", 40))]
    fits = [(step, unit, factor) for unit, factor, step in units if size >= factor]
    fits = [f for f in fits if size % f[0] == 0]
    if not fits:
        return f"{size} B"
    _step, unit, factor = max(fits)
    return f"{size / factor:g} {unit}"


__all__ = ["EdgeVia", "KindName", "format_size", "parse_size"]
