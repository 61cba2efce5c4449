"""``lp.Program``: nodes added under group labels, as Launchpad builds a topology."""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sys
from collections.abc import Iterator
from types import CodeType, FrameType
from typing import Any

from topo.diagnostics import SourcePos
from topo.launchpad.nodes.base import Node, NodeHandle

# Frames in files under this directory are topo's own: a node's position is the first
# frame outside it (the user's add_node call, or their call of make_program).
_TOPO_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


class Program:
    """A distributed program being built: label -> the nodes added under it.

    ``add_node`` returns a handle to pass to other nodes. Nodes added inside
    ``with program.group(label):`` go to that group; elsewhere ``label=`` names it."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._groups: dict[str, list[Node]] = {}
        self._current: str | None = None
        self._sites: dict[int, SourcePos] = {}  # node uid -> where it was added

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
            raise ValueError(
                "Current group is only available in group context. "
                "(inside a `with program.group(label):` block)"
            )
        return self._current

    def add_node(self, node: Node, label: str | None = None) -> NodeHandle | None:
        """Add ``node`` under the current group (or ``label``); a handle to it.

        A colocation has no handle of its own: adding one returns None. As in Launchpad,
        any object with a ``create_handle()`` is kept (a test's mock node); only real
        nodes can be launched."""
        if self._current is not None:
            if label and label != self._current:
                raise ValueError(
                    "The given label does not match the current group: "
                    f"{label} vs {self._current}. (inside `with program.group(...)`, "
                    "leave label out or give the group's)"
                )
            label = self._current
        elif not label:
            raise ValueError(
                "Label should not be empty. (outside a `with program.group(label):` block, "
                "add_node needs label=...)"
            )
        if not isinstance(node, Node) and not callable(getattr(node, "create_handle", None)):
            raise TypeError(f"add_node takes a node (e.g. lp.CourierNode(...)), got {node!r}")
        for other in self.get_all_nodes():
            for inner in _inner(node):
                if any(inner is x for x in _inner(other)):
                    what = inner.describe() if isinstance(inner, Node) else repr(inner)
                    raise ValueError(
                        f"{what} was added to the program twice: topo runs each "
                        "node once (make another node to run it again)"
                    )
        self._groups.setdefault(label, []).append(node)
        if not isinstance(node, Node):
            return node.create_handle()  # type: ignore[no-any-return]
        site = _caller(sys._getframe(1))
        if site is not None:
            self._sites[node.uid] = site
        if len(node.inner_nodes()) == 1 and node.inner_nodes()[0] is node:
            return node.create_handle()
        return None

    @contextlib.contextmanager
    def group(self, label: str) -> Iterator[None]:
        """Nodes added inside this block go to group ``label``."""
        if not label:
            raise ValueError("Label should not be empty. (program.group needs a label)")
        if self._current is not None:
            raise ValueError(
                f"group() cannot be nested. (group {label!r} opened inside group {self._current!r})"
            )
        self._current = label
        try:
            yield
        finally:
            self._current = None

    def added_at(self, node: Node) -> SourcePos | None:
        """The file, line and column of the ``add_node`` call that added ``node`` (a node
        or colocation given to add_node), for errors that point at the user's code."""
        uid = node.uid if isinstance(node, Node) else None
        return self._sites.get(uid) if uid is not None else None

    def get_all_nodes(self) -> list[Node]:
        """Every node added, group by group."""
        return [n for nodes in self._groups.values() for n in nodes]

    def __repr__(self) -> str:
        counts = ", ".join(f"{k}×{len(v)}" for k, v in self._groups.items())
        return f"<lp.Program {self._name!r}: {counts}>"


def _inner(node: Any) -> list[Any]:
    """The nodes ``node`` stands for (a colocation's; an object that is no node itself)."""
    return node.inner_nodes() if isinstance(node, Node) else [node]


def _caller(frame: FrameType | None) -> SourcePos | None:
    """The position of the first call outside topo on the stack from ``frame`` outwards."""
    while frame is not None and frame.f_code.co_filename.startswith(_TOPO_DIR):
        frame = frame.f_back
    if frame is None:
        return None
    return SourcePos(frame.f_code.co_filename, frame.f_lineno, _column(frame.f_code, frame.f_lasti))


@functools.lru_cache(maxsize=256)
def _column(code: CodeType, lasti: int) -> int:
    """The 1-based column of the instruction at byte offset ``lasti`` (a loop of add_node
    calls asks for the same one again)."""
    here = next(itertools.islice(code.co_positions(), max(lasti, 0) // 2, None), None)
    return (here[2] if here is not None and here[2] is not None else 0) + 1


def make_program(*nodes: Node, name: str = "launchpad") -> Program:
    """A program of ``nodes``, each under its own label ``node_<i>``."""
    program = Program(name)
    for i, node in enumerate(nodes):
        program.add_node(node, label=f"node_{i}")
    return program
