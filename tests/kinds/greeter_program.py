"""A Launchpad program built with the plug-in ``greeter`` kind, as a package offering a kind
would let its users write one: ``GreeterNode`` gives the kind its own fields.

Copied next to kind_plugin.py into the test distribution; ``topo export`` builds it."""

from __future__ import annotations

from typing import Any

from kind_plugin import greet

import topo.launchpad as lp


class GreeterNode(lp.Node):
    """A greeter: the kind's own fields ``greeting`` and ``out``."""

    kind = "greeter"

    def __init__(self, greeting: str, out: str) -> None:
        super().__init__(greet, greeting=greeting, out=out)

    def kind_fields(self) -> dict[str, Any]:
        """The greeter's YAML fields, which the kind turns into its target's arguments."""
        return dict(self.kwargs)


def make_program(out: str, count: int = 2) -> lp.Program:
    """``count`` greeters writing ``hi <i>`` to ``<out>/<i>.txt``, and one writing ``hello``."""
    program = lp.Program("greetings")
    with program.group("hello"):
        for i in range(count):
            program.add_node(GreeterNode(f"hi {i}", f"{out}/{i}.txt"))
    program.add_node(GreeterNode("hello", f"{out}/hello.txt"), label="solo")
    return program
