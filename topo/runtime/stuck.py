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
import logging
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from topo.runtime import wire

log = logging.getLogger("topo.runtime.pool")

_MARGIN_S = 1.0  # a waiting call is answered this long (at most) before its deadline
_MARGIN_SHARE = 0.2  # ...or this share of its timeout, for short ones

# (routing id, parsed call, its frames or None for a call of a batch)
Request = tuple[Any, wire.Message, "list[Any] | None"]
# Told a busy report (``busy_report``) when the pool is flagged, None when it is not.
OnBusy = Callable[["dict[str, Any] | None"], None]


class Waiting:
    """Calls received while every handler was busy, oldest first (thread-safe)."""

    def __init__(self, aside: frozenset[str] = frozenset()) -> None:
        self._lock = threading.Lock()
        self._calls: collections.deque[tuple[float, Request]] = collections.deque()
        self._aside_names = aside
        self._aside: list[Request] = []  # calls of the ``aside`` methods: not queued

    def __bool__(self) -> bool:
        return bool(self._calls)

    def add(self, request: Request, now: float) -> None:
        """Queue a call; it is given up just before the caller's deadline. A call of one
        of the ``aside`` methods is kept apart, for ``take_aside``."""
        if request[1].method in self._aside_names:
            with self._lock:
                self._aside.append(request)
            return
        timeout = max(0.0, request[1].timeout)
        give_up = now + timeout - min(_MARGIN_S, timeout * _MARGIN_SHARE)
        with self._lock:
            self._calls.append((give_up, request))

    def take_in(self, frames: list[Any], now: float, dropped: Callable[[str], None]) -> None:
        """Queue the calls of a received message (``frames``: routing id first)."""
        if len(frames) < 2 or (len(frames) == 2 and not len(frames[1])):
            return  # a wake-up (a handler's reply is in the outbox), or not a call
        msg = wire.parse(frames, 1)
        if msg is None:
            dropped("not a topo request (bad or truncated header)")
        elif msg.kind == wire.K_BATCH:
            for call in wire.split_batch(msg) or []:
                self.add((frames[0], call, None), now)
        else:
            self.add((frames[0], msg, frames), now)

    def take_aside(self) -> list[Request]:
        """Remove and return the calls of the ``aside`` methods taken in."""
        if not self._aside:
            return []
        with self._lock:
            out, self._aside = self._aside, []
        return out

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


class BusyFlag:
    """Flags a pool once every handler thread has been busy for ``busy_after_s`` (a
    warning with their stacks, and ``on_busy``), and clears it once one is free."""

    def __init__(self, node: str, threads: int, busy_after_s: float, on_busy: OnBusy | None):
        self.node = node
        self.threads = threads
        self.busy_after = busy_after_s
        self.on_busy = on_busy
        self.report: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self._told = 0

    def check(self, now: float, since: float | None, running: dict[int, tuple[str, float]]) -> None:
        """``since``: every thread busy since then (None: one is free); ``running``:
        thread id -> (method, since) of the busy ones."""
        if since is not None and now - since >= self.busy_after and self.report is None:
            info = busy_report(self.node, self.threads, now - since, running, now)
            self.report = info
            # Into the node's log (stderr is routed there on every backend), whatever
            # logging the program set up.
            text = f"topo: {info['message']}; their stacks:\n{info['stacks']}"
            print(text, file=sys.stderr, flush=True)
            self._tell(info)
        elif since is None and self.report is not None:
            self.report = None
            print(f"topo: node {self.node} answers calls again", file=sys.stderr, flush=True)
            self._tell(None)

    def _tell(self, info: dict[str, Any] | None) -> None:
        """Pass the flag to ``on_busy`` on a thread of its own (it may make a call); an
        older state that has not gone out yet is skipped."""
        on_busy = self.on_busy
        if on_busy is None:
            return
        self._told += 1
        seq = self._told

        def send() -> None:
            with self._lock:
                if seq != self._told:
                    return
                try:
                    on_busy(info)
                except Exception as exc:
                    log.warning("topo node %s: could not report busy: %r", self.node, exc)

        threading.Thread(target=send, name=f"topo-busy-{self.node}", daemon=True).start()
