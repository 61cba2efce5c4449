"""What the example agents' nodes keep in a program snapshot, and where they pause.

A node's ``save()`` returns plain numpy arrays, ints and dicts (no JAX device arrays,
no optax classes), so a state pickles small and loads on any machine; ``restore()``
refits them into the structure a freshly built node holds and refuses, naming what
differs, a state of another configuration. :func:`pause_step` is the pause point of a
loop that counts into the program's counter: when a snapshot is being taken it first
sends the counts still batched locally, so the counter holds what the node holds.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np

import topo
from topo.runtime.context import current_node_info
from topo.runtime.pause import gate_of

# What a flush of counts or priorities may raise when its peer is stopping or slow
# (topo's PeerUnavailable is a ConnectionError, its DeadlineExceeded a TimeoutError;
# examples.agents.common.Stopping a RuntimeError): a snapshot goes on without it.
FLUSH_ERRORS = (ConnectionError, TimeoutError, RuntimeError)


def numpy_leaves(tree: Any) -> list[np.ndarray]:
    """The leaves of a JAX tree, copied to numpy arrays (host memory)."""
    return [np.array(leaf) for leaf in jax.device_get(jax.tree_util.tree_leaves(tree))]


def fill_tree(template: Any, leaves: list[Any], what: str) -> Any:
    """``template``'s tree with ``leaves`` (from :func:`numpy_leaves`) as JAX arrays; a
    ``ValueError`` naming the first misfit when the leaves are of another ``what``."""
    treedef = jax.tree_util.tree_structure(template)
    mine = jax.tree_util.tree_leaves(template)
    if len(mine) != len(leaves):
        raise ValueError(
            f"this checkpoint is of another {what} (its state does not fit): it has "
            f"{len(leaves)} arrays where this {what} has {len(mine)}"
        )
    for i, (have, got) in enumerate(zip(mine, leaves, strict=True)):
        got = np.asarray(got)
        if np.shape(have) != got.shape or np.asarray(have).dtype != got.dtype:
            raise ValueError(
                f"this checkpoint is of another {what} (its state does not fit): array {i} "
                f"is {got.dtype}{list(got.shape)} where this {what} has "
                f"{np.asarray(have).dtype}{list(np.shape(have))}"
            )
    return jax.tree_util.tree_unflatten(treedef, [jax.numpy.asarray(v) for v in leaves])


def rng_state(generator: np.random.Generator) -> dict[str, Any]:
    """Where a numpy generator's stream is (a small dict)."""
    return dict(generator.bit_generator.state)


def set_rng_state(generator: np.random.Generator, state: dict[str, Any]) -> None:
    """Put a numpy generator back where :func:`rng_state` found one: its next draws are
    the ones the saved generator would have drawn next."""
    generator.bit_generator.state = dict(state)


def env_rng_state(env: Any) -> dict[str, Any]:
    """The stream a gymnasium environment draws its start states from."""
    return rng_state(env.unwrapped.np_random)


def set_env_rng_state(env: Any, state: dict[str, Any]) -> None:
    """Continue a gymnasium environment's start-state stream (its next ``reset()``
    without a seed starts where the saved one's would have)."""
    set_rng_state(env.unwrapped.np_random, state)


def pause_requested() -> bool:
    """Whether a snapshot is waiting for the calling thread's node to pause."""
    node = current_node_info()
    return node is not None and gate_of(node.id).requested


def pause_step(counter: Any = None, *flushes: Callable[[], Any]) -> None:
    """A loop's pause point. While a snapshot is being taken, first run ``flushes`` (work
    handed to helper threads that must land before the node holds) and send ``counter``'s
    batched counts to its parent, so the program's counter agrees with the node's own
    counts at the snapshot; then wait at ``topo.pausepoint()``."""
    if pause_requested():
        for flush in flushes:
            try:
                flush()
            except FLUSH_ERRORS:  # its peer is stopping: nothing more will land
                pass
        if counter is not None:
            try:
                counter.get_counts()  # a local Counter sends what it batched
            except FLUSH_ERRORS:
                pass
    topo.pausepoint()


def node_thread(target: Callable[..., Any], name: str, *args: Any) -> threading.Thread:
    """A started daemon thread running ``target(*args)`` as the calling thread's node, so
    its pause points hold it with the node (a bare thread of a process that runs several
    nodes belongs to none)."""
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(target, *args), name=name, daemon=True)
    thread.start()
    return thread


def wait_pausing(
    fn: Callable[[], Any], stop: threading.Event, counter: Any = None, poll_s: float = 0.05
) -> Any:
    """``fn()`` (a call that may wait long on another node: a sample from an empty queue,
    an insert into a full one) run in a helper thread while this thread passes
    :func:`pause_step` every ``poll_s``, so a snapshot holds it (its counts sent first)
    while the call waits; None once ``stop`` is set first (the helper is abandoned)."""
    box: list[tuple[bool, Any]] = []
    done = threading.Event()

    def call() -> None:
        try:
            box.append((True, fn()))
        except BaseException as exc:  # handed to the caller below
            box.append((False, exc))
        done.set()

    node_thread(call, "wait-pausing")
    while not done.wait(poll_s):
        if stop.is_set():
            return None
        pause_step(counter)
    ok, value = box[0]
    if not ok:
        if stop.is_set():  # it failed because the program is stopping (the replay closed)
            return None
        raise value
    return value


class CountSender:
    """A node's counts, sent to the program's counter in batches (``counter``: a local
    ``topo.nodes.Counter`` sending at once, ``time_delta=0``): at most every ``every_s``
    seconds, and at once by :meth:`flush` (a snapshot's pause point). ``sent`` is what
    the counter holds of them: what a snapshot saves, equal to the counter's at any
    point the node may be held, even inside a pausable wait."""

    def __init__(self, counter: Any, every_s: float = 1.0) -> None:
        self._counter = counter
        self._every_s = every_s
        self._pending: dict[str, int] = {}
        self._last = float("-inf")
        self._counts: dict[str, Any] = {}
        self.sent: dict[str, int] = {}

    def add(self, **counts: int) -> dict[str, Any]:
        """Count; send when due. The program's counts as last seen."""
        for key, value in counts.items():
            self._pending[key] = self._pending.get(key, 0) + value
        if time.monotonic() - self._last >= self._every_s:
            self.flush()
        return self._counts

    def flush(self) -> None:
        """Send what is pending now."""
        pending, self._pending = self._pending, {}
        self._last = time.monotonic()
        try:
            self._counts = dict(self._counter.increment(**pending))
        except BaseException:
            for key, value in pending.items():  # not sent: keep them for the next time
                self._pending[key] = self._pending.get(key, 0) + value
            raise
        for key, value in pending.items():
            self.sent[key] = self.sent.get(key, 0) + value

    def restore(self, sent: dict[str, int]) -> None:
        """Continue from counts a saved node had sent."""
        self.sent = {k: int(v) for k, v in sent.items()}
        self._pending = {}
        self._counter.restore(dict(self.sent))
