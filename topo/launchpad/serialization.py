"""``lp.launch(..., serialize_py_nodes=True)``: check that every node's constructor and
arguments pickle, before anything starts, and fail as Launchpad does (a RuntimeError
naming the group) rather than with topo's own wording."""

from __future__ import annotations

import io
from typing import Any

import cloudpickle

from topo.launchpad.nodes.base import Node, NodeHandle
from topo.launchpad.program import Program


class _Pickler(cloudpickle.Pickler):
    """cloudpickle, with handles left out: topo wires them, it never pickles them."""

    def persistent_id(self, obj: Any) -> Any:
        if isinstance(obj, NodeHandle):
            return obj.node.uid
        return None


def check_nodes_are_serializable(label: str, nodes: list[Any]) -> None:
    """Pickle what builds each node of group ``label``; a RuntimeError if one cannot be."""
    pieces = [
        (inner.constructor, inner.args, dict(inner.kwargs))
        for node in nodes
        for inner in (node.inner_nodes() if isinstance(node, Node) else [])  # no mocks
    ]
    try:
        _Pickler(io.BytesIO()).dump(pieces)
    except Exception as exc:
        raise RuntimeError(
            f"{type(exc).__name__}: {exc}\n"
            f"The nodes associated to the label {label!r} were not serializable using "
            "cloudpickle. Make what they are built from picklable, or launch with "
            "lp.launch(..., serialize_py_nodes=False): on local_mt and test_mt nodes then "
            "get their arguments as they are (events, locks, mocks)"
        ).with_traceback(exc.__traceback__) from exc


def check_program_serializable(program: Program) -> None:
    """:func:`check_nodes_are_serializable` for every group of ``program``, in order."""
    for label, nodes in program.groups.items():
        check_nodes_are_serializable(label, nodes)
