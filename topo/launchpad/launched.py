"""A launched Launchpad program: wait, stop, dereference, and the launches of this
process (what ``handle.dereference()`` and ``lp.stop()`` outside a node look up)."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from topo.api import RunningProgram
from topo.launchpad import live
from topo.launchpad.failures import NodeFailure, exception_for
from topo.launchpad.nodes.base import Node, set_dereferencer
from topo.launchpad.translate import Compiled

_POLL_S = 0.05
_UP_S = 60.0  # how long dereference() waits for a node with a call deadline


class Launched:
    """A launched Launchpad program (what Launchpad's worker manager is to its users):
    ``wait``, ``stop``, and the topo run underneath (``run``)."""

    def __init__(self, compiled: Compiled, run: RunningProgram) -> None:
        self.compiled = compiled
        self.run = run
        self.live_objects: list[str] = []  # objects given as they are (serialize_py_nodes=False)
        self._ended: threading.Event | None = None
        self._delivered = False  # a failure raised to the caller is not raised again

    @property
    def program(self) -> Any:
        """The topo Program IR that runs."""
        return self.compiled.program

    @property
    def stop_event(self) -> threading.Event:
        """Set once the program has ended (one event, however often asked)."""
        with _lock:
            if self._ended is None:
                self._ended = threading.Event()
                threading.Thread(target=self._watch_end, name="topo-lp-ended", daemon=True).start()
        return self._ended

    def _watch_end(self) -> None:
        self.run.launcher.wait()
        assert self._ended is not None
        self._ended.set()

    def node_id(self, node: Node) -> str:
        """The topo node id of a Launchpad node of this program (KeyError if absent)."""
        return self.compiled.node_ids[node.uid]

    def wait(
        self,
        labels_to_wait_on: Sequence[str] | None = None,
        timeout: float | None = None,
        return_on_first_completed: bool = False,
        raise_error: bool = True,
    ) -> int | None:
        """Wait for the program to end -- or for the nodes of ``labels_to_wait_on`` to
        finish -- and re-raise a node's failure (``raise_error``). The exit code, or None
        when ``timeout`` passed (or the labels' nodes ended while the program runs)."""
        if isinstance(labels_to_wait_on, str):
            labels_to_wait_on = [labels_to_wait_on]
        elif labels_to_wait_on is not None and not isinstance(labels_to_wait_on, Sequence):
            raise TypeError(
                f"wait() takes a list of labels first, got {labels_to_wait_on!r} (a timeout "
                "is wait(timeout=seconds))"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            if labels_to_wait_on or return_on_first_completed:
                labels = labels_to_wait_on or [g.label or g.name for g in self.program.groups]
                self._wait_labels(labels, deadline, return_on_first_completed)
                code = self.run.exit_code
            else:
                code = self.run.wait(
                    None if deadline is None else max(0.0, deadline - time.monotonic())
                )
        except KeyboardInterrupt:
            self.run.stop()
            raise
        if raise_error:
            self.raise_failure()
        return code

    def _wait_labels(self, labels: Sequence[str], deadline: float | None, first: bool) -> None:
        groups = {g.label or g.name: g.name for g in self.program.groups}
        unknown = [label for label in labels if label not in groups]
        if unknown:
            raise ValueError(f"no group labelled {unknown[0]!r} (labels: {', '.join(groups)})")
        wanted = [n.id for n in self.program.nodes if n.group in {groups[x] for x in labels}]
        while self.run.exit_code is None:
            states = [self.run.launcher.state.nodes[n].state for n in wanted]
            ended = [s in ("finished", "failed") for s in states]
            if "failed" in states or (any(ended) if first else all(ended)):
                return
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(_POLL_S)

    def raise_failure(self) -> None:
        """Raise the node failure that ended the program -- once: after it reached a
        caller (``wait()``, the test case's cleanup), later calls return quietly, as
        Launchpad forgets a failure it has raised."""
        exc = self.failure()
        with _lock:
            if exc is None or self._delivered:
                return
            self._delivered = True
        raise exc

    def failure(self) -> BaseException | None:
        """The node failure that ended the program (or a failed node's, while it stops),
        as the exception to raise; None if no node failed."""
        failure = self.run.failure
        if failure is None:
            for status in self.run.status():
                if status.state == "failed":
                    return NodeFailure(status.id, status.last_line)
            return None
        return exception_for(failure.node, failure.traceback or failure.message)

    def stop(self, timeout: float | None = None) -> int | None:
        """Stop the program and wait for it (up to ``timeout``)."""
        return self.run.stop("stopped by lp.stop()", timeout)

    def dereference(self, node: Node) -> Any:
        """A client of ``node`` for the calling (non-node) thread."""
        node_id = self.node_id(node)
        timeout = self.program.rpc_of(node_id).call_timeout_s
        if timeout is not None:  # a short deadline counts from when the node is up
            self._wait_up(node_id, _UP_S)
        return self.run.handle(node_id, timeout)

    def _wait_up(self, node_id: str, limit: float) -> None:
        end = time.monotonic() + limit
        status = self.run.launcher.state.nodes[node_id]
        while status.state in ("pending", "starting") and self.run.exit_code is None:
            if time.monotonic() >= end:
                return
            time.sleep(_POLL_S)


_launched: list[Launched] = []
_lock = threading.Lock()


def remember(launched: Launched) -> None:
    """Keep ``launched`` among this process's launches (forgetting those that ended)."""
    prune()
    with _lock:
        _launched.append(launched)


def running() -> list[Launched]:
    """This process's launches that have not ended, oldest first."""
    with _lock:
        return [x for x in _launched if x.run.exit_code is None]


def prune() -> None:
    """Forget launches that have ended (and the objects they were handed)."""
    with _lock:
        ended = [x for x in _launched if x.run.exit_code is not None]
        for x in ended:
            _launched.remove(x)
    for x in ended:
        live.release(x.live_objects)


def dereference(node: Node) -> Any:
    """A client of ``node`` in the newest launched program that holds it."""
    with _lock:
        runs = list(reversed(_launched))
    for launched in runs:
        if node.uid in launched.compiled.node_ids:
            return launched.dereference(node)
    raise RuntimeError(
        f"{node.describe()} is not part of a launched program: call lp.launch(program) "
        "first, then dereference its handles"
    )


def last_launched() -> Launched | None:
    """The most recent launch still running, if any (``lp.stop()`` outside a node)."""
    with _lock:
        for launched in reversed(_launched):
            if launched.run.exit_code is None:
                return launched
    return None


set_dereferencer(dereference)
