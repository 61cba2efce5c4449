"""A node whose handler threads are all stuck: the calls that wait, and what to report.

When every handler thread of a node is busy for a while, the pool's watcher takes
the socket (see ``pool.py``): calls that arrive then wait here, in order, for a
thread to come free, and one still waiting when its deadline comes near is answered
with ``NodeBusy`` instead of being left to time out in silence. ``busy_report``
says which methods hold the threads, with their stacks, for the node's log and the
supervisor.
"""

from __future__ import annotations

import collections
import sys
import threading
import traceback
from typing import Any

from topo.runtime import wire

_MARGIN_S = 1.0  # a waiting call is answered this long (at most) before its deadline
_MARGIN_SHARE = 0.2  # ...or this share of its timeout, for short ones

# (routing id, parsed call, its frames or None for a call of a batch)
Request = tuple[Any, wire.Message, "list[Any] | None"]


class Waiting:
    """Calls received while every handler was busy, oldest first (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: collections.deque[tuple[float, Request]] = collections.deque()

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(self, request: Request, now: float) -> None:
        """Queue a call; it is given up just before the caller's deadline."""
        timeout = max(0.0, request[1].timeout)
        give_up = now + timeout - min(_MARGIN_S, timeout * _MARGIN_SHARE)
        with self._lock:
            self._calls.append((give_up, request))

    def take(self) -> Request | None:
        """The oldest waiting call, for a handler thread that came free."""
        with self._lock:
            return self._calls.popleft()[1] if self._calls else None

    def expired(self, now: float) -> list[Request]:
        """Remove and return the calls whose deadline is near."""
        with self._lock:
            if not any(at <= now for at, _ in self._calls):
                return []
            out = [r for at, r in self._calls if at <= now]
            self._calls = collections.deque((at, r) for at, r in self._calls if at > now)
            return out

    def next_at(self) -> float | None:
        """When the next call will be given up (None: nothing waits)."""
        with self._lock:
            return min((at for at, _ in self._calls), default=None)

    def clear(self) -> None:
        """Forget every waiting call (the node is stopping)."""
        with self._lock:
            self._calls.clear()


def held_by(running: dict[int, tuple[str, float]]) -> str:
    """``step ×7, save`` : the methods the busy handler threads are in."""
    counts = collections.Counter(m for m, _ in running.values())
    return ", ".join(f"{m} ×{n}" if n > 1 else m for m, n in counts.most_common())


def busy_report(
    node: str, threads: int, busy_s: float, running: dict[int, tuple[str, float]], now: float
) -> dict[str, Any]:
    """What a node whose handler threads are all busy reports: the methods, how long each
    has run, and the threads' stacks."""
    frames = sys._current_frames()
    stacks = []
    handlers = []
    for ident, (method, since) in sorted(running.items(), key=lambda kv: kv[1][1]):
        handlers.append({"method": method, "running_s": round(now - since, 1)})
        frame = frames.get(ident)
        stack = "".join(traceback.format_stack(frame)) if frame is not None else "(gone)\n"
        stacks.append(f"handler thread in {method} for {now - since:.1f}s:\n{stack}")
    return {
        "node": node,
        "threads": threads,
        "busy_s": round(busy_s, 1),
        "methods": [h["method"] for h in handlers],
        "handlers": handlers,
        "stacks": "\n".join(stacks),
        "message": (
            f"node {node} answers no calls: all {threads} handler threads busy for "
            f"{busy_s:.0f}s (in {held_by(running)})"
        ),
    }
