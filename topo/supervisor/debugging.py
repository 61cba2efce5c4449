"""The launcher's side of ``breakpoint()`` in a node (``topo.runtime.debugger``): where
each node stopped, from the rows its process sends on the metrics channel, and
``topo debug``'s reads and writes, passed to the node's state door."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from topo.runs.node_status import NodeStatus

MAX_AT = 300  # characters of "file:line" kept


class Asks(Protocol):
    """The launcher's calls to nodes' state doors (``Snapshotter``)."""

    served: Any

    def ask(self, node_id: str, op: str, timeout: float, *args: Any) -> Any: ...


def stopped_at(
    stops: list[dict[str, Any]], nodes: Mapping[str, NodeStatus]
) -> Iterator[tuple[str, str | None]]:
    """Set each reporting node's ``breakpoint`` (None: it goes on); (node, where) of
    each change."""
    for row in stops:
        node, at = row.get("node"), row.get("at")
        st = nodes.get(node) if isinstance(node, str) else None
        if st is None or not (at is None or isinstance(at, str)):
            continue
        at = None if at is None else at[:MAX_AT]
        if at != st.breakpoint:
            st.breakpoint = at
            yield st.id, at


def said_at(run_id: str, node: str, at: str | None) -> str:
    """The line the run's output gets when ``node`` stops (``at``) or goes on."""
    if at is None:
        return "goes on from its breakpoint"
    return f"at breakpoint ({at}): topo debug {run_id} {node}"


def debug_node(
    node: str,
    action: str,
    text: str,
    wait_s: float,
    nodes: Mapping[str, NodeStatus],
    doors: Asks,
    again: bool = False,
) -> dict[str, Any]:
    """``topo debug``'s request: read the pdb output of ``node`` at its breakpoint (its
    prompt waited for up to ``wait_s``; ``again``: a client attaching, shown where pdb
    waits), or write it a line; ``active`` false when the
    node is at no breakpoint."""
    if node not in nodes:
        return {
            "ok": False,
            "error": f"the program has no node {node!r} (its nodes: {', '.join(nodes)})",
        }
    if node not in doors.served:
        return {"ok": False, "error": f"node {node} serves no calls: it cannot be debugged"}
    if nodes[node].state == "starting":
        why = "at a breakpoint in its constructor" if nodes[node].breakpoint else "starting"
        return {
            "ok": False,
            "error": f"node {node} is {why}: topo debug reaches a node once it is up "
            "(a breakpoint() in run() or in a method)",
        }
    try:
        answer = doors.ask(node, "debug", wait_s + 10.0, action, text, wait_s, again)
        found = answer.result(timeout=wait_s + 12.0)
    except Exception as exc:
        return {"ok": False, "error": f"node {node} did not answer ({type(exc).__name__}: {exc})"}
    return {"ok": True, **dict(found)}
