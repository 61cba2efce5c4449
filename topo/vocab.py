"""Words every stage shares, defined below all of them: the IR, the node kinds and the
loader use them without importing one another."""

from __future__ import annotations

from typing import Literal

KindName = str  # a name in the node-kind catalogue (topo.kinds), checked by the compiler
EdgeVia = Literal["ref", "round_robin", "fallback", "source", "primary"]

__all__ = ["EdgeVia", "KindName"]
