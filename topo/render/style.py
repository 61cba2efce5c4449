"""The one colour palette of every picture (DOT, Mermaid, terminal tree).

Colours are keyed by a node's drawing role (the kind's ``draw`` in the IR, or
counter / limiter for those built-in targets), by edge wiring, and by box kind.
Each entry has an SVG-style fill and stroke for DOT and Mermaid, and a rich
style name for the terminal.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Colour:
    """``fill`` and ``stroke`` as #rrggbb (or "none"), ``term`` a rich style."""

    fill: str
    stroke: str
    term: str


ROLE: dict[str, Colour] = {
    "courier": Colour("#e8f0fe", "#1a73e8", "blue"),
    "py": Colour("#f1f3f4", "#5f6368", "white"),
    "reverb": Colour("#fce8e6", "#c5221f", "red"),
    "cacher": Colour("#fef7e0", "#b06000", "yellow"),
    "counter": Colour("#e6f4ea", "#137333", "green"),
    "limiter": Colour("#fde7f3", "#a50e5f", "magenta"),
}
DEFAULT_ROLE = Colour("#ffffff", "#5f6368", "")
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


def role_colour(role: str) -> Colour:
    """The colours of a drawing role; a neutral default for roles without their own."""
    return ROLE.get(role, DEFAULT_ROLE)
