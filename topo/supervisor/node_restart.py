"""``topo restart RUN NODE`` (and the dashboard's Restart action) on the launcher: the
node's executable is killed and started again, its nodes taking along the state they
have now, as ``topo apply`` hands it over (``save()`` just before the end, ``restore()``
at the next start), or starting fresh (``--fresh``).

A node with no live state to hand over (it is down, or its ``save()`` failed) starts
from the newest snapshot holding its state, and the answer says which and from when:
``learner restores snapshot 3, taken 2m10s ago (it is failed: no live state)``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from topo.rundir.snapshots import Snapshot, human_size
from topo.supervisor.state import ExeStatus, NodeStatus


@dataclass(frozen=True)
class Handed:
    """A node's live state taken for its next start: its size, and the node's threads
    still busy (in a call or a step) when the pause bound ran out -- the state is taken
    as it is then, as a snapshot takes it."""

    size: int
    moving: tuple[str, ...] = ()


class States(Protocol):
    """What a restart asks of the run's snapshotter."""

    served: list[str]

    def take_states(self, node_ids: list[str]) -> dict[str, Handed | str | None]: ...

    def start_fresh(self, node_ids: list[str]) -> None: ...

    def start_source(self, node_id: str) -> tuple[str, Snapshot | None]: ...


def restart_node(
    node: str,
    by: str,
    fresh: bool,
    *,
    nodes: Mapping[str, NodeStatus],
    exes: Mapping[str, ExeStatus],
    phase: str,
    states: States | None,
    restart: Callable[[str, str], None],
) -> dict[str, Any]:
    """Restart ``node``'s executable (``restart(node, by)`` asks the supervisor); the
    answer: the nodes restarted and, in ``message``, the state each starts from -- or
    why not (``ok`` false)."""
    status = nodes.get(node)
    if status is None:
        return {"ok": False, "error": f"the program has no node {node!r}"}
    if phase not in ("starting", "running"):
        return {"ok": False, "error": f"the run is {phase}: nothing is restarted"}
    exe = exes[status.exe]
    if exe.leaving or exe.retiring:
        return {"ok": False, "error": f"node {node} is being ended by a change (topo apply)"}
    if exe.runner is None and exe.restart_at is None:
        return {"ok": False, "error": f"node {node} is {status.state}: it has no process"}
    said = []
    if states is not None:
        served = [n for n in exe.nodes if n in states.served]
        if fresh:
            states.start_fresh(served)
        live = [n for n in served if nodes[n].state == "running"] if not fresh else []
        taken = states.take_states(live) if live else {}
        said = [_said(n, taken, nodes[n].state, fresh, states) for n in served]
    restart(node, by)
    return {
        "ok": True,
        "node": node,
        "executable": exe.id,
        "nodes": list(exe.nodes),
        "message": "; ".join(s for s in said if s),
    }


def _said(
    node: str, taken: dict[str, Handed | str | None], state: str, fresh: bool, states: States
) -> str:
    """What ``node`` starts from, in words ("" for a node that keeps no state)."""
    if fresh:
        return f"{node} starts fresh (--fresh)"
    got = taken.get(node, "")
    if isinstance(got, Handed):
        busy = f", {', '.join(got.moving)} still busy: not paused" if got.moving else ""
        return f"{node} keeps its live state ({human_size(got.size)}, saved just now{busy})"
    if node in taken and got is None:
        return ""  # it keeps no state (no save())
    why = f"it is {state}" if node not in taken else str(got)
    where, snapshot = states.start_source(node)
    if where == "fresh":
        return f"{node} starts fresh, as a change or restart asked before ({why})"
    if where == "handed":
        return f"{node} restores the state it handed over at its last change ({why} now)"
    if snapshot is not None:
        ago = _ago(time.time() - snapshot.taken_at)
        return (
            f"{node} restores snapshot {snapshot.number}, taken {ago} ago "
            f"({why}: no live state to hand over)"
        )
    return f"{node} starts fresh ({why}, and no snapshot holds its state)"


def _ago(seconds: float) -> str:
    """``42s``, ``2m10s``, ``3h05m``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"
