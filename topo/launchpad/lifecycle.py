"""Launchpad's stop API on topo: ``lp.stop``, ``wait_for_stop``, ``stop_event``, stop
handlers and the program stopper.

Inside a node they act on the node's program (topo's lifecycle API); outside one,
``lp.stop()`` stops the program launched last from this process.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import topo
from topo.runtime.context import current_node_info

log = logging.getLogger("topo.launchpad")

# id(stop event) -> the handlers of that program (the threads backend runs several
# programs in one process) and the event, kept alive while its handlers wait.
_handlers: dict[int, tuple[threading.Event, list[Callable[[], Any]]]] = {}
_handlers_lock = threading.Lock()


def stop(mark_as_completed: bool = False) -> None:
    """Stop the whole program: the calling node's, or outside a node the one launched last."""
    if current_node_info() is not None:
        topo.stop("lp.stop() called")
        return
    from topo.launchpad.launch import last_launched

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
    """Set once the program of the calling node is stopping."""
    return topo.stop_event()


def wait_for_stop(timeout: float | None = None) -> bool:
    """Block until the program stops (True) or ``timeout`` passes (False)."""
    return topo.wait_for_stop(timeout)


def register_stop_handler(handler: Callable[[], Any]) -> None:
    """Call ``handler()`` once when the program starts stopping (from a topo thread).

    What it raises -- ``SystemExit`` included, as Acme's terminator does -- is logged,
    not treated as a failure: the program is stopping anyway."""
    event = topo.stop_event()
    with _handlers_lock:
        entry = _handlers.get(id(event))
        if entry is None:
            entry = _handlers[id(event)] = (event, [])
            threading.Thread(
                target=_call_handlers, args=(event,), name="topo-lp-stop-handlers", daemon=True
            ).start()
        entry[1].append(handler)


def unregister_stop_handler(handler: Callable[[], Any]) -> None:
    """Forget a handler given to :func:`register_stop_handler` (ValueError if unknown)."""
    with _handlers_lock:
        for _, handlers in _handlers.values():
            if handler in handlers:
                handlers.remove(handler)
                return
    raise ValueError(f"{handler!r} is not a registered stop handler")


def _call_handlers(event: threading.Event) -> None:
    event.wait()
    with _handlers_lock:
        _, handlers = _handlers.pop(id(event), (event, []))
    for handler in handlers:
        try:
            handler()
        except BaseException as exc:
            log.info("stop handler %r raised %s while stopping", handler, type(exc).__name__)
