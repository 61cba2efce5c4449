"""What the ray backend keeps per executable that runs in a Ray actor of its own: the
runner the launcher holds (kill, stacks), the calls in flight that the actors' watcher
follows; and Ray's errors in a few words. (An attempt forked by a node's agent is the
remote core's ``remote.records.RemoteRunner``.)"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topo.backends.base import ExecutableRunner
from topo.backends.logs import file_size, wait_written
from topo.rundir.layout import log_name

LOGS_EVERY_S = 0.25  # how often the watcher pulls the actors' new output
DEAD_BECAUSE = "The actor is dead because "  # Ray's words, before the reason
TERMINATE_S = 1.0  # an actor asked to exit gets this long before ray.kill


class Ender:
    """Actors being ended: each was asked to exit (``__ray_terminate__``: its ``atexit``
    handlers run once its running calls return) and is ``ray.kill``ed ``TERMINATE_S``
    later if still there: by the watcher (``reap``), or at the latest before the backend
    disconnects (``finish``: Ray's own clean-up of a finished job's actors is slow)."""

    def __init__(self) -> None:
        self._pending: list[tuple[float, Any]] = []
        self._lock = threading.Lock()

    def end(self, actor: Any) -> None:
        import ray

        # After ray.shutdown every actor is gone, and a call would start a new Ray.
        if not ray.is_initialized():
            return
        try:
            actor.__ray_terminate__.remote()
        except Exception:  # already gone
            return
        with self._lock:
            self._pending.append((time.monotonic() + TERMINATE_S, actor))

    def reap(self) -> None:
        """``ray.kill`` the actors whose time to exit by themselves has passed."""
        now = time.monotonic()
        with self._lock:
            due = [a for t, a in self._pending if t <= now]
            self._pending = [(t, a) for t, a in self._pending if t > now]
        _kill_all(due)

    def finish(self) -> None:
        """Give the last ones their time, then ``ray.kill`` every actor still pending."""
        with self._lock:
            last = max((t for t, _ in self._pending), default=0.0)
        time.sleep(max(0.0, min(TERMINATE_S, last - time.monotonic())))
        with self._lock:
            left = [a for _, a in self._pending]
            self._pending.clear()
        _kill_all(left)


def _kill_all(actors: list[Any]) -> None:
    import ray

    if not actors or not ray.is_initialized():
        return
    for actor in actors:
        try:
            ray.kill(actor, no_restart=True)
        except Exception:  # gone by itself: nothing left to end
            pass


class RayRunner(ExecutableRunner):
    """One attempt of one executable as a Ray actor (``kill``: ``__ray_terminate__``, then
    ``ray.kill``; the launcher calls it once the stop channel's grace has passed)."""

    def __init__(
        self, exe: str, attempt: int, actor: Any, ender: Ender, output: Path | None = None
    ) -> None:
        self.exe = exe
        self.output = output  # the run directory's log its output is appended to
        self.ender = ender
        self.attempt = attempt
        self.pid = 0
        self.node_ip: str | None = None
        self.actor = actor
        self.killed = False

    def kill(self) -> None:
        self.killed = True
        if self.actor is not None:
            self.ender.end(self.actor)

    def dump_stacks(self, node: str) -> str:
        import ray

        if self.actor is None or not self.pid:
            return ""
        before = file_size(self.output)
        try:  # a busy machine can take seconds to schedule the actor's answer
            ray.get(self.actor.dump_stacks.remote(), timeout=10)
        except Exception:
            return ""
        # The watcher pulls the dump into the log every LOGS_EVERY_S; wait until it has.
        wait_written(self.output, before, limit_s=max(5.0, LOGS_EVERY_S * 20))
        return f"(the stacks of its threads are in its log, {log_name(node)})"


@dataclass
class Live:
    """One actor the watcher follows, and its calls in flight."""

    runner: RayRunner
    run_ref: Any
    where_ref: Any | None
    log_ref: Any | None = None


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (Ray's run on for paragraphs)."""
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__


def why_dead(exc: BaseException) -> str:
    """Why Ray says an actor died, in a few words: "its worker process has died", or the
    error its constructor raised."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in lines:
        if line.startswith(DEAD_BECAUSE):
            return line[len(DEAD_BECAUSE) :].split(". ", 1)[0].rstrip(".")
    raised = [line for line in lines[1:] if "Error" in line.split(":", 1)[0]]
    return f"its constructor raised {raised[-1]}" if raised else first_line(exc)
