"""What reaches a run's supervisor from any thread, queued for its own thread.

The backend's threads, the registry's handlers, signal handlers and other shells (the
control channel) report here: a node's status, an executable started or exited, the
backend failing, a stop or a kill asked for, a restart asked for, new metric figures,
and work to do between two reports (``call_soon``: ``topo apply``). ``Reports`` is the
queue; the ``Supervisor`` (``topo.supervisor.reactions``) takes them off it one at a
time. ``Emit`` is where the supervisor's status events go.
"""

from __future__ import annotations

import queue
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from topo.backends.base import EventKind, Sink


class Emit(Protocol):
    """Where the supervisor's status events go (the launcher's listeners)."""

    def __call__(
        self,
        kind: EventKind,
        node: str | None = None,
        exe: str | None = None,
        pid: int | None = None,
        message: str = "",
        **data: Any,
    ) -> None: ...


class Reports(Sink):
    """The queue of reports to one run's supervisor: every method may be called from any
    thread and returns at once."""

    def __init__(self) -> None:
        self._inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._stop_asked = False  # set at once by request_stop/kill, before their turn comes

    def node_status(
        self, kind: str, node: str, exe: str, attempt: int, pid: int, traceback: str = ""
    ) -> None:
        self._inbox.put(("node", kind, node, exe, attempt, pid, traceback))

    def exited(
        self, exe: str, attempt: int, pid: int, code: int, reason: str = "", started: bool = True
    ) -> None:
        self._inbox.put(("exited", exe, attempt, pid, code, reason, started))

    def started(self, exe: str, attempt: int, pid: int) -> None:
        self._inbox.put(("started", exe, attempt, pid))

    def backend_failed(self, message: str) -> None:
        self._inbox.put(("backend_failed", message))

    def request_stop(self, reason: str = "stop requested", code: int = 0) -> None:
        """Stop the run (``code``: the exit code of a clean stop)."""
        self._stop_asked = True
        self._inbox.put(("stop", reason, None, code))

    def kill(self) -> None:
        """Kill every executable now."""
        self._stop_asked = True
        self._inbox.put(("kill",))

    def restart(self, node: str, by: str) -> None:
        """Restart ``node``'s executable: kill its attempt and start it again at once."""
        self._inbox.put(("restart", node, by))

    def metrics_changed(self, nodes: list[str]) -> None:
        """``nodes`` have new figures (already stored): tell the view."""
        self._inbox.put(("metrics", nodes))

    def call_soon(self, fn: Callable[[], Any]) -> Future[Any]:
        """Run ``fn`` on the supervisor's thread, between two reports (``topo apply``
        changes the run's state this way); its result or exception in the future."""
        future: Future[Any] = Future()
        self._inbox.put(("call", fn, future))
        return future

    def _next_report(self, timeout: float) -> tuple[Any, ...] | None:
        """The next report, waiting up to ``timeout`` (None: none came)."""
        try:
            return self._inbox.get(timeout=timeout)
        except queue.Empty:
            return None
