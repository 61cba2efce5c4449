"""Phases of a run the live view shows beyond a node's state.

* What a starting node waits for (``NodeStatus.phase``): its process (procs: the fork
  server still importing, or forking), a peer whose address it looked up and did not
  find (``waiting for replay``), else its own import and constructor (``building``).
* A steps limiter's progress (``LimiterProgress``): the figures ``topo.nodes.StepsLimiter``
  writes as metrics (``limit_key``, the key's count, ``limit``, ``eta_s``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from topo.ir import Program
from topo.runs.node_status import LimiterProgress, NodeStatus

CHECK_EVERY_S = 0.25
NO_PROCESS = "waiting for its process"
BUILDING = "building"


def peers_of(program: Program) -> dict[str, tuple[str, ...]]:
    """Node id -> the nodes it holds handles to, in argument order, each once."""
    peers: dict[str, list[str]] = {n.id: [] for n in program.nodes}
    for edge in program.edges:
        if edge.src in peers and edge.dst not in peers[edge.src]:
            peers[edge.src].append(edge.dst)
    return {n: tuple(p) for n, p in peers.items()}


def starting_phase(pid: int | None, peers: tuple[str, ...], awaited: set[str]) -> str:
    """What a starting node waits for, given its pid (None: no process yet), its peers
    and the nodes whose addresses some caller is waiting for."""
    if pid is None:
        return NO_PROCESS
    waiting = [p for p in peers if p in awaited]
    if waiting:
        more = f" +{len(waiting) - 1}" if len(waiting) > 1 else ""
        return f"waiting for {waiting[0]}{more}"
    return BUILDING


class PhaseWatch:
    """Keeps ``NodeStatus.phase`` of starting nodes current (``update`` every step)."""

    def __init__(self, program: Program, awaited: Callable[[], set[str]]) -> None:
        self._peers = peers_of(program)
        self._awaited = awaited
        self._last = float("-inf")

    def update(self, nodes: Mapping[str, NodeStatus], now: float) -> bool:
        """Refresh the phases (at most every ``CHECK_EVERY_S``); True when one changed."""
        if now - self._last < CHECK_EVERY_S:
            return False
        self._last = now
        starting = [st for st in nodes.values() if st.state == "starting"]
        awaited = self._awaited() if starting else set()
        changed = False
        for st in nodes.values():
            phase = ""
            if st.state == "starting":
                phase = starting_phase(st.pid, self._peers.get(st.id, ()), awaited)
            if phase != st.phase:
                st.phase = phase
                changed = True
        return changed


def limiter_progress(nodes: Mapping[str, NodeStatus]) -> LimiterProgress | None:
    """The progress a limiter node reported in its metrics (None: no limiter reported)."""
    for st in nodes.values():
        m: dict[str, Any] = st.metrics
        key = m.get("limit_key")
        if not isinstance(key, str) or not _number(m.get(key)) or not _number(m.get("limit")):
            continue
        eta = m.get("eta_s")
        return LimiterProgress(st.id, key, m[key], m["limit"], eta if _number(eta) else None)
    return None


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
