"""Lifecycle API for node code: ``topo.stop()``, ``topo.wait_for_stop()``, ...

All of them act on the program of the calling thread (see ``context``), so
stopping one program never touches another started from the same shell.
"""

from __future__ import annotations

import threading

from topo.runtime.context import NodeInfo, current_node_info, current_program


def stop(reason: str = "topo.stop() called") -> None:
    """Stop the whole program this node belongs to."""
    program = current_program()
    node = current_node_info()
    program.address_book.request_stop(reason, node.id if node else None)


def stop_event() -> threading.Event:
    """An event that is set once the program is stopping."""
    return current_program().stop_event


def wait_for_stop(timeout: float | None = None) -> bool:
    """Block until the program stops (True) or ``timeout`` seconds pass (False)."""
    return current_program().stop_event.wait(timeout)


def current_node() -> NodeInfo:
    """The node (id, group, replica) the calling code runs as."""
    node = current_node_info()
    if node is None:
        raise RuntimeError("topo.current_node() called outside a topo node")
    return node
