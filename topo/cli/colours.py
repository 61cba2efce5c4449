"""The colour of each node's ``node | `` prefix: stable across runs and commands, so
``topo run`` and ``topo logs`` show a node the same way. No imports beyond the standard
library (``topo logs`` starts fast)."""

from __future__ import annotations

import zlib

PALETTE = (
    "cyan",
    "green",
    "yellow",
    "blue",
    "magenta",
    "bright_cyan",
    "bright_green",
    "bright_yellow",
    "bright_blue",
    "bright_magenta",
)


def colour(label: str) -> str:
    """A stable colour for a node id."""
    return PALETTE[zlib.crc32(label.encode()) % len(PALETTE)]
