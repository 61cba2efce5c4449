"""The one colour palette of every picture (DOT, Mermaid, terminal tree).

Colours of nodes come from their drawing role, as the node kinds declare it
(:func:`look`, read from :mod:`topo.kinds`); the palette here is keyed by edge wiring
and by box kind. Each entry has an SVG-style fill and stroke for DOT and Mermaid, and a
rich style name for the terminal.
"""

from __future__ import annotations

from dataclasses import dataclass

from topo.kinds import Look, look_of


@dataclass(frozen=True, slots=True)
class Colour:
    """``fill`` and ``stroke`` as #rrggbb (or "none"), ``term`` a rich style."""

    fill: str
    stroke: str
    term: str


EDGE: dict[str, Colour] = {
    "round_robin": Colour("none", "#1a73e8", "cyan"),
    "fallback": Colour("none", "#5f6368", "dim"),
    "source": Colour("none", "#b06000", "yellow"),
    "primary": Colour("none", "#7b1fa2", "magenta"),
}
BOX: dict[str, Colour] = {
    "group": Colour("none", "#5f6368", "bold"),
    "threads": Colour("#fff8e1", "#f9a825", "bold yellow"),
    "process": Colour("#fff8e1", "#f9a825", "yellow"),
    "host": Colour("none", "#00897b", "bold green"),
}
DISABLED = Colour("#f5f5f5", "#bdbdbd", "dim")
DISABLED_TEXT = "#9e9e9e"


def look(role: str) -> Look:
    """How nodes of a drawing role look (shape, colours), as the kind declaring the role
    says; a neutral look for roles no registered kind declares."""
    return look_of(role)
