"""Launchpad's stop API on topo: ``lp.stop``, ``wait_for_stop``, ``stop_event``, stop
handlers and the program stopper.

Inside a node they act on the node's program (topo's lifecycle API); outside one,
``lp.stop()`` stops the program launched last from this process.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

from topo.runtime import lifecycle
from topo.runtime.context import current_node_info

log = logging.getLogger("topo.launchpad")


class _Stopping:
    """One program's stop, as this process sees it: the handlers to call, and the event
    Launchpad's API shows -- set once the handlers ran, as Launchpad calls stop
    handlers before nodes see the stop (so a node's cleanup cannot overtake them)."""

    def __init__(self, event: threading.Event) -> None:
        self.handlers: list[Callable[[], Any]] = []
        self.done = threading.Event()
        threading.Thread(
            target=self._on_stop, args=(event,), name="topo-lp-stop-handlers", daemon=True
        ).start()

    def _on_stop(self, event: threading.Event) -> None:
        event.wait()
        while True:
            with _lock:
                if not self.handlers:
                    self.done.set()
                    return
                handler = self.handlers.pop(0)
            try:
                handler()
            except BaseException as exc:
                log.info("stop handler %r raised %s while stopping", handler, type(exc).__name__)


# topo's stop event of a program -> its _Stopping (the threads backend runs several
# programs in one process; entries go with their program's event).
_stopping: weakref.WeakKeyDictionary[threading.Event, _Stopping] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _current() -> _Stopping:
    event = lifecycle.stop_event()
    with _lock:
        entry = _stopping.get(event)
        if entry is None:
            entry = _stopping[event] = _Stopping(event)
    return entry


def stop(mark_as_completed: bool = False) -> None:
    """Stop the whole program: the calling node's, or outside a node the one launched last."""
    if current_node_info() is not None:
        lifecycle.stop("lp.stop() called")
        return
    from topo.launchpad.launched import last_launched

    launched = last_launched()
    if launched is None:
        raise RuntimeError("lp.stop() outside a node needs a launched program")
    launched.run.launcher.request_stop("lp.stop() called")


def stop_program(mark_as_completed: bool = False) -> None:
    """What :func:`make_program_stopper` returns: stops the program when called."""
    stop(mark_as_completed)


def make_program_stopper(launch_type: Any = None) -> Callable[..., None]:
    """A callable that stops the program, for nodes to call when they are done."""
    return stop_program


def stop_event() -> threading.Event:
    """Set once the program of the calling node is stopping (after its stop handlers ran)."""
    return _current().done


def wait_for_stop(timeout: float | None = None) -> bool:
    """Block until the program stops (True) or ``timeout`` passes (False); the stop
    handlers have run by the time it returns True."""
    return _current().done.wait(timeout)


def register_stop_handler(handler: Callable[[], Any]) -> None:
    """Call ``handler()`` once when the program starts stopping (from a topo thread),
    before ``wait_for_stop``/``stop_event`` show the stop.

    What it raises -- ``SystemExit`` included, as Acme's terminator does -- is logged,
    not treated as a failure: the program is stopping anyway."""
    entry = _current()
    with _lock:
        entry.handlers.append(handler)


def unregister_stop_handler(handler: Callable[[], Any]) -> None:
    """Forget a handler given to :func:`register_stop_handler` (ValueError if unknown)."""
    with _lock:
        for entry in list(_stopping.values()):
            if handler in entry.handlers:
                entry.handlers.remove(handler)
                return
    raise ValueError(f"{handler!r} is not a registered stop handler")
