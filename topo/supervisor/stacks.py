"""``topo stacks``: the Python stacks of a live run's nodes, taken without stopping them.

Each node is asked at once through its state door (the launcher's authenticated call,
served beside busy handlers, ``topo.runtime.stacks``), on every backend alike. A node
that does not answer within ``ASK_S`` (its process stuck outside Python, the GIL held)
or serves no calls (a ``py`` node) has its backend dump the stacks instead, as a stop
past its grace does: the text itself on threads, into its log elsewhere (the answer
says where)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

from topo.runs.node_status import NodeStatus
from topo.supervisor.state import ExeStatus

ASK_S = 5.0  # how long a node gets to answer before its backend dumps its stacks
LIVE = ("running", "starting")


def node_stacks(
    names: list[str],
    nodes: Mapping[str, NodeStatus],
    exes: Mapping[str, ExeStatus],
    served: Callable[[str], bool],
    ask: Callable[[str, float], Future[Any]],
) -> dict[str, Any]:
    """The answer to ``topo stacks``: node -> its stacks (or why there are none), for
    ``names`` (all nodes when empty); ``ok`` false naming a node the program lacks.
    ``ask(node, timeout)`` sends the state door's ``stacks`` call."""
    unknown = [n for n in names if n not in nodes]
    if unknown:
        return {
            "ok": False,
            "error": f"the program has no node {', '.join(map(repr, unknown))} "
            f"(its nodes: {', '.join(nodes)})",
        }
    wanted = names or list(nodes)
    out: dict[str, str] = {}
    asked: dict[str, Future[Any]] = {}
    for node in wanted:
        state = nodes[node].state
        if state not in LIVE:
            out[node] = f"({state}: it has no process)"
        elif served(node):
            asked[node] = ask(node, ASK_S)
    for node in wanted:
        if node in out:
            continue
        why = "it serves no calls"
        if node in asked:
            try:
                out[node] = str(asked[node].result(timeout=ASK_S + 1.0))
                continue
            except Exception as exc:  # stuck outside Python, or just ended
                why = f"it did not answer within {ASK_S:g}s ({type(exc).__name__})"
        runner = exes[nodes[node].exe].runner
        dumped = runner.dump_stacks(node) if runner is not None else ""
        out[node] = f"({why}) {dumped or 'and its backend could not dump them'}"
    return {"ok": True, "stacks": {n: out[n] for n in wanted}}
