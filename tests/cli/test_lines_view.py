"""``topo run``'s prefixed lines: a node's line is put in a frame rendered once per node
and reads exactly as rich renders it (the node's colour, control codes, markup-like
text, tabs, lines wider than the terminal)."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text

from topo.backends.base import Event
from topo.backends.threads import ThreadsBackend
from topo.cli.colours import colour
from topo.cli.view import LinesView
from topo.supervisor.state import NodeStatus

MESSAGES = [
    "step 10 loss 0.25",
    "[bold]not markup[/bold] :smile: http://example.com/x 3.14 True",
    "a bell\x07, a carriage return\r and a backspace\x08 left out",
    "\x1b[31mred from the node itself\x1b[0m",
    "wide 漢字 and an emoji 🎉",
    "x" * 300,  # wider than the console: not wrapped
    "a\ttab and\tanother",
    "",
]


class _Launcher:
    """What LinesView reads of a launcher."""

    def __init__(self) -> None:
        self.nodes = {n: NodeStatus(n, n) for n in ("actor/0", "learner")}
        self.backend = ThreadsBackend()

    def location(self, exe_id: str) -> str | None:
        return self.backend.location(exe_id)

    def device(self, exe_id: str) -> str | None:
        return None


def _console(out: io.StringIO, terminal: bool) -> Console:
    if terminal:
        return Console(file=out, width=80, force_terminal=True, color_system="truecolor")
    return Console(file=out, width=80, no_color=True)


@pytest.mark.parametrize("terminal", [True, False], ids=["colours", "piped"])
def test_a_nodes_lines_read_as_rich_renders_them(terminal: bool) -> None:
    out, expected = io.StringIO(), io.StringIO()
    launcher: Any = _Launcher()
    lines = LinesView(launcher, _console(out, terminal))
    reference = _console(expected, terminal)
    for node in ("actor/0", "learner", "actor/0"):
        for message in MESSAGES:
            lines(Event("log", node, message=message))
            prefix = Text(f"{node:<{lines.width}} | ", style=colour(node))
            reference.print(prefix + Text(message), soft_wrap=True, highlight=False)
    assert out.getvalue() == expected.getvalue()
    if terminal:  # each line in its node's colour
        assert out.getvalue().startswith("\x1b[")
    else:
        assert "\x1b[3" not in out.getvalue().replace("\x1b[31mred", "")
        assert (
            out.getvalue().splitlines()[2]
            == "actor/0 | a bell, a carriage return and a backspace left out"
        )
