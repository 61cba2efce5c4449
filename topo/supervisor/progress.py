"""Stalls: a running node whose progress has not moved for too long is flagged.

A node's progress is the rows it writes with ``topo.metrics`` loggers (Acme's loggers
write one per episode or learner step): each batch that reaches the launcher moves it.
Only a node that reported progress at least once is watched, so servers that log
nothing (a replay, a counter) are never flagged. A node is stalled when it is
``running`` and nothing came for its group's ``stall_after_s`` (0: never), or for three
times its usual interval between reports if that is longer (an evaluator reporting every
ten minutes is not stalled after five), counted from its last report or from the start
of its current attempt, whichever is later.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from topo.supervisor.state import NodeStatus

GAP_FACTOR = 3.0  # a node is given this many of its usual intervals between reports
CHECK_EVERY_S = 0.5


@dataclass
class _Seen:
    first: float
    last: float
    count: int = 1

    def usual_gap(self) -> float:
        """The mean interval between reports (0 after one)."""
        return (self.last - self.first) / (self.count - 1) if self.count > 1 else 0.0


# (node, stalled for s) when a stall begins; (node, -s) when progress comes back after s.
Change = tuple[str, float]


class ProgressWatch:
    """Notes each node's progress and tells which running nodes stalled or resumed.

    ``limit_of(node)`` is the node's ``stall_after_s``; times are wall-clock seconds."""

    def __init__(self, limit_of: Callable[[str], float]) -> None:
        self._limit_of = limit_of
        self._seen: dict[str, _Seen] = {}
        self._next_check = 0.0

    def progressed(self, node: str, now: float) -> None:
        """``node`` made progress at ``now``."""
        seen = self._seen.get(node)
        if seen is None:
            self._seen[node] = _Seen(now, now)
        else:
            seen.count += 1
            seen.last = now

    def last(self, node: str) -> float | None:
        """When ``node`` last made progress (None: never)."""
        seen = self._seen.get(node)
        return None if seen is None else seen.last

    def limit(self, node: str) -> float | None:
        """Seconds without progress after which ``node`` is stalled (None: never)."""
        base = self._limit_of(node)
        seen = self._seen.get(node)
        if base <= 0 or seen is None:
            return None
        return max(base, GAP_FACTOR * seen.usual_gap())

    def describe(self, node: str, seconds: float) -> str:
        """What a change of :meth:`check` says: a stall begins, or progress is back."""
        if seconds < 0:
            return f"making progress again after {-seconds:.0f}s"
        limit = self.limit(node) or seconds
        return f"no progress for {seconds:.0f}s (no metrics row; limit {limit:g}s)"

    def check(self, nodes: Mapping[str, NodeStatus], now: float) -> list[Change]:
        """Update every node's ``stalled_s``; the stalls that began or ended since the
        last check (checked at most every ``CHECK_EVERY_S``)."""
        if now < self._next_check:
            return []
        self._next_check = now + CHECK_EVERY_S
        changes: list[Change] = []
        for node, st in nodes.items():
            was = st.stalled_s
            st.stalled_s = self._stalled_for(node, st, now)
            if was is None and st.stalled_s is not None:
                changes.append((node, st.stalled_s))
            elif was is not None and st.stalled_s is None and st.state == "running":
                changes.append((node, -was))
        return changes

    def _stalled_for(self, node: str, st: NodeStatus, now: float) -> float | None:
        limit = self.limit(node)
        last = self.last(node)
        if limit is None or last is None or st.state != "running" or st.breakpoint:
            return None
        since = max(last, st.started or last)
        idle = now - since
        return round(idle, 1) if idle >= limit else None
