"""Pause points: where a node's own threads may be held while a snapshot is taken.

A node's loop calls ``topo.pausepoint()`` between steps, where its state is whole (the
learner between two updates, an actor between two environment steps). It costs one
attribute read unless a snapshot is being taken; then the thread waits there until the
node's state was saved. ``topo.pausable()`` marks a blocking wait during which the
node's state does not change (a Reverb insert held by its rate limiter): the thread
counts as paused while inside, and waits at its end if the snapshot is still on.

A snapshot pauses every node, takes every state, then lets them all go, so what it
saves is one consistent point of the program: nothing that calls another node moves.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager

from topo.runtime.context import current_node_info, maybe_current_program


class Gate:
    """One node's pause gate: which of its threads take part, which are held."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self.requested = False  # read without the lock on the fast path
        self._members: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
        self._held: set[int] = set()  # idents of threads paused now

    def _stopping(self) -> bool:
        program = maybe_current_program()
        return program is not None and program.stop_event.is_set()

    def point(self) -> None:
        """A thread of the node is between steps: wait here while a pause is on."""
        me = threading.current_thread()
        if not self.requested:
            if me not in self._members:
                with self._cond:
                    self._members.add(me)
            return
        with self._cond:
            self._members.add(me)
            self._held.add(me.ident or 0)
            self._cond.notify_all()
            try:
                while self.requested and not self._stopping():
                    self._cond.wait(0.1)
            finally:
                self._held.discard(me.ident or 0)

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """The body is a wait that changes nothing: the thread counts as paused in it."""
        me = threading.current_thread()
        with self._cond:
            self._members.add(me)
            self._held.add(me.ident or 0)
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._held.discard(me.ident or 0)
            self.point()

    def pause(self, timeout: float) -> list[str]:
        """Hold every thread that takes part at its next pause point; the names of those
        still moving after ``timeout`` seconds (empty: the node is still)."""
        end = time.monotonic() + timeout
        with self._cond:
            self.requested = True
            while True:
                moving = [
                    t.name
                    for t in list(self._members)
                    if t.is_alive() and t.ident not in self._held
                ]
                left = end - time.monotonic()
                if not moving or left <= 0 or self._stopping():
                    return moving
                self._cond.wait(min(left, 0.05))

    def resume(self) -> None:
        """Let every held thread go."""
        with self._cond:
            self.requested = False
            self._cond.notify_all()


_gates: dict[str, Gate] = {}
_gates_lock = threading.Lock()


def gate_of(node_id: str) -> Gate:
    """The gate of ``node_id`` in this process (made on first use)."""
    gate = _gates.get(node_id)
    if gate is None:
        with _gates_lock:
            gate = _gates.setdefault(node_id, Gate())
    return gate


def forget_gate(node_id: str) -> None:
    """Drop the gate of a node that stopped running in this process."""
    with _gates_lock:
        gate = _gates.pop(node_id, None)
    if gate is not None:
        gate.resume()


def pausepoint() -> None:
    """Between two steps of a node's loop: wait here while a snapshot is being taken.
    Outside a node it does nothing."""
    node = current_node_info()
    if node is not None:
        gate_of(node.id).point()


@contextmanager
def pausable() -> Iterator[None]:
    """Wrap a blocking wait that changes none of the node's state (a call held by a rate
    limiter), so a snapshot need not wait for it to end."""
    node = current_node_info()
    if node is None:
        yield
        return
    with gate_of(node.id).waiting():
        yield
