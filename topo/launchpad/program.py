"""``lp.Program``: nodes added under group labels, as Launchpad builds a topology."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from topo.launchpad.nodes.base import Node, NodeHandle


class Program:
    """A distributed program being built: label -> the nodes added under it.

    ``add_node`` returns a handle to pass to other nodes. Nodes added inside
    ``with program.group(label):`` go to that group; elsewhere ``label=`` names it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._groups: dict[str, list[Node]] = {}
        self._current: str | None = None

    @property
    def name(self) -> str:
        """The program's name (run directories, logs)."""
        return self._name

    @property
    def groups(self) -> dict[str, list[Node]]:
        """Label -> the nodes added under it, in order (colocations as added)."""
        return self._groups

    @property
    def current_group(self) -> str:
        """The label of the enclosing ``group()`` block."""
        if self._current is None:
            raise ValueError("current_group is only set inside a program.group() block")
        return self._current

    def add_node(self, node: Node, label: str | None = None) -> NodeHandle | None:
        """Add ``node`` under the current group (or ``label``); a handle to it.

        A colocation has no handle of its own: adding one returns None."""
        if not isinstance(node, Node):
            raise TypeError(f"add_node takes a node (e.g. lp.CourierNode(...)), got {node!r}")
        if self._current is not None:
            if label and label != self._current:
                raise ValueError(
                    f"label {label!r} does not match the enclosing group {self._current!r}"
                )
            label = self._current
        elif not label:
            raise ValueError("add_node needs a label outside a program.group() block")
        for other in self.get_all_nodes():
            for inner in node.inner_nodes():
                if inner is other or inner in other.inner_nodes():
                    raise ValueError(f"{inner.describe()} was added to the program twice")
        self._groups.setdefault(label, []).append(node)
        if len(node.inner_nodes()) == 1 and node.inner_nodes()[0] is node:
            return node.create_handle()
        return None

    @contextlib.contextmanager
    def group(self, label: str) -> Iterator[None]:
        """Nodes added inside this block go to group ``label``."""
        if not label:
            raise ValueError("a group label cannot be empty")
        if self._current is not None:
            raise ValueError("program.group() blocks cannot be nested")
        self._current = label
        try:
            yield
        finally:
            self._current = None

    def get_all_nodes(self) -> list[Node]:
        """Every node added, group by group."""
        return [n for nodes in self._groups.values() for n in nodes]

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}×{len(v)}" for k, v in self._groups.items())
        return f"<lp.Program {self._name!r}: {counts}>"


def make_program(*nodes: Node, name: str = "launchpad") -> Program:
    """A program of ``nodes``, each under its own label ``node_<i>``."""
    program = Program(name)
    for i, node in enumerate(nodes):
        program.add_node(node, label=f"node_{i}")
    return program
