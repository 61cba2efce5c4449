"""Distributed DQN as topo nodes, laid out the way Acme lays out its agents
(``examples/topologies/acme_distributed.yaml`` and ``acme_colocated.yaml``), on any
environment with discrete actions (``env``: CartPole-v1 by default, a gymnasium id or a
dm_env factory, :mod:`examples.agents.envs`; the network and the replay's signature are
made from its spec).

- :class:`Learner` (served): samples n-step transitions from Reverb, takes jitted
  double-DQN steps (haiku MLP, optax adam, target network), updates priorities, counts
  ``learner_steps``; peers call ``get_variables``/``save``/``restore``. A secondary
  learner (``primary_learner`` set) starts from the primary's state and keeps syncing its
  parameters from it, serving ``get_variables`` to spread the actors' load.
- :class:`Actor` (in :mod:`examples.agents.dqn_actor`): epsilon-greedy (Ape-X epsilons
  per actor), writes transitions into Reverb, refreshes its parameters
  without blocking, counts ``actor_steps``.
- :class:`Evaluator`: the greedy policy every few seconds; prints and logs the mean return
  and prints ``final evaluation return: X`` when the program stops.
- :class:`ModelSaver`: snapshots the learner's parameters as ``.npz`` files.
  (These two live in :mod:`examples.agents.dqn_eval`.)

Every node is snapshot-ready (issue 29): ``save()``/``restore()`` carry its learning
state as numpy, its loops pass ``topo.pausepoint()`` between steps, and its waits on
other nodes (Reverb samples and inserts a rate limiter holds, parameter fetches) are
inside ``topo.pausable()``, so a snapshot holds the whole program at one point.

No JAX runs at import (see :mod:`examples.agents.dqn_core`); nothing is shared between
nodes at module level, so several nodes can run as threads of one process.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

import topo
from examples.agents.common import StopAware, Stopping
from examples.agents.dqn_actor import Actor
from examples.agents.dqn_core import (
    TABLE,
    flat_batch,
    initial_state,
    make_network,
    make_optimizer,
    make_replay_tables,
    make_sgd_step,
    replay_dataset,
    seed_of,
)
from examples.agents.dqn_eval import Evaluator, ModelSaver
from examples.agents.envs import DEFAULT, spec_of
from examples.agents.node_state import fill_tree, node_thread, numpy_leaves, pause_step
from examples.agents.priorities import PrioritySender
from topo.nodes import Counter

__all__ = ["Actor", "Evaluator", "Learner", "ModelSaver", "make_replay_tables"]
log = logging.getLogger("examples.agents.dqn")
PRIORITIES_FLUSH_S = 5.0  # at a snapshot, how long the learner waits for its priorities
# At the stop, how long the learner waits for its sampler to end: one rate-limiter timeout
# and a little more. Not longer: a sample on a replay that has stopped first is retried by
# Reverb until the server comes back, and a longer wait ate the stop's whole grace.
SAMPLER_JOIN_S = 1.5
VARIABLE_NAMES = ("policy", "params")  # names get_variables answers with the online params


class Learner:
    """The DQN learner (see the module docstring). ``replay`` may be None for a learner
    driven by hand through :meth:`update` (tests).

    Snapshots: :meth:`save` is its whole training state (online and target parameters,
    the optimiser's state, the step count; its update has no randomness of its own).
    Pause points: between two updates (where the counter is sent its batched steps and
    the new priorities are sent to the replay first; the wait for the sampler's next
    batch is a short poll that passes it), in the sampler thread between two batches,
    in a secondary's sync loop; the sampler's Reverb sample, its hand-over of a batch
    and a secondary's fetch from the primary are pausable waits. The priority
    sender thread only sends what the learner hands it and is flushed before the learner
    holds, so it takes no part."""

    def __init__(
        self,
        random_key: Any = 0,
        replay: Any = None,
        counter: Any = None,
        primary_learner: Any = None,
        *,
        batch_size: int = 64,
        learning_rate: float = 1e-3,
        target_update_period: int = 100,
        importance_sampling_exponent: float = 0.2,
        hidden_sizes: Sequence[int] = (64, 64),
        sync_every_s: float = 1.0,
        log_every_s: float = 1.0,
        env: str = DEFAULT,
    ) -> None:
        self._replay = replay
        self._primary = primary_learner
        self._batch_size = batch_size
        self._sync_every_s = sync_every_s
        spec = spec_of(env)  # the network's input and output sizes
        self._network = make_network(hidden_sizes, spec.num_actions)
        self._optimizer = make_optimizer(learning_rate)
        self._sgd_step = make_sgd_step(
            self._network, self._optimizer, target_update_period, importance_sampling_exponent
        )
        self._state = initial_state(
            self._network, self._optimizer, seed_of(random_key), spec.observation_size
        )
        # A count under way when the program stops is given up: the counter may be gone.
        self._counter = Counter(None if counter is None else StopAware(counter), "learner")
        self._logger = topo.metrics.logger("learner", every_s=log_every_s)
        self._lock = threading.Lock()
        self._version = 0  # bumped whenever the params change
        self._numpy: tuple[int, Any] | None = None  # (version, numpy params)
        self._priorities: PrioritySender | None = None
        self.steps = 0
        if primary_learner is not None:
            # As in Acme: a secondary starts from the primary's state.
            self.restore(primary_learner.save())

    # -- served methods ------------------------------------------------------------------

    def get_variables(self, names: Sequence[str]) -> list[Any]:
        """The online parameters (numpy) once per name in ``names`` (``policy``/``params``),
        or the target network's for ``target``."""
        out = []
        for name in names:
            if name in VARIABLE_NAMES:
                out.append(self._numpy_params())
            elif name == "target":
                out.append(jax.device_get(self._state.target_params))
            else:
                raise KeyError(f"unknown variable {name!r}: use one of {[*VARIABLE_NAMES]}")
        return out

    def save(self) -> dict[str, Any]:
        """The whole training state as numpy arrays: the leaves of (params, target params,
        optimizer state, step) in order, and the step count."""
        with self._lock:
            state, steps = self._state, self.steps
        return {"state": numpy_leaves(state), "steps": steps}

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue from a state that :meth:`save` returned: the next update is the one the
        saved learner would have made next. A state of a learner with other network sizes
        or another optimiser is refused (``ValueError`` naming the misfit)."""
        state = fill_tree(self._state, list(saved["state"]), "DQN learner")
        with self._lock:
            self._state = state
            self.steps = int(saved["steps"])
            self._version += 1
        self._counter.restore({"steps": self.steps})

    # -- learning ------------------------------------------------------------------------

    def update(
        self,
        batch: dict[str, np.ndarray],
        probabilities: np.ndarray | None = None,
        keys: np.ndarray | None = None,
    ) -> float:
        """One SGD step on ``batch`` (fields of :data:`dqn_core.FIELDS`, batch first); sends
        the new priorities of ``keys`` to the replay in the background. Its loss."""
        if probabilities is None:
            probabilities = np.ones(len(batch["action"]), np.float32)
        state, loss, priorities = self._sgd_step(
            self._state, batch, np.asarray(probabilities, np.float32)
        )
        with self._lock:
            self._state = state
            self.steps += 1
            self._version += 1
        if keys is not None and self._replay is not None:
            self._send_priorities(keys, priorities)
        return float(loss)

    def _send_priorities(self, keys: np.ndarray, priorities: Any) -> None:
        """Hand the new priorities to the sender thread (started on first use: the replay's
        method is looked up here, in a topo node's thread); none are dropped."""
        if self._priorities is None:
            try:
                stop = topo.stop_event()
            except RuntimeError:  # a learner driven by hand, outside a program (tests)
                stop = threading.Event()
            self._priorities = PrioritySender(self._replay.mutate_priorities, TABLE, stop)
        updates = dict(zip(np.asarray(keys).tolist(), np.asarray(priorities).tolist(), strict=True))
        self._priorities.send(updates)

    def run(self) -> None:
        """Learn until the program stops (a secondary: keep syncing from the primary)."""
        stop = topo.stop_event()
        try:
            if self._primary is not None:
                self._follow_primary(stop)
            else:
                self._learn(stop)
        finally:
            sent = ""
            if self._priorities is not None:
                self._priorities.close()
                sender = self._priorities
                sent = (
                    f" (priorities sent: {sender.sent_keys} in {sender.calls} calls,"
                    f" {sender.superseded} replaced by a newer one before sending, none dropped)"
                )
            print(f"learner: stopped after {self.steps} learner steps{sent}", flush=True)

    def _learn(self, stop: threading.Event) -> None:
        if self._replay is None:
            raise RuntimeError("this learner has no replay to learn from")
        batches: queue.Queue[Any] = queue.Queue(maxsize=2)
        # A daemon: a sample call stuck on a stopped replay must not hold the exit.
        sampler = node_thread(
            self._sample_loop, "dqn-sampler", self._replay.address(), stop, batches
        )
        try:
            self._learn_from(batches, stop)
        finally:
            # Its samples wait at most the rate limiter's timeout while the replay is up:
            # ended before the learner is, it is not left waiting on a replay that stops
            # next (a threads program runs in one process, which outlives it). If the
            # replay stopped first it stays behind as a daemon: the wait is bounded.
            sampler.join(SAMPLER_JOIN_S)

    def _learn_from(self, batches: queue.Queue[Any], stop: threading.Event) -> None:
        started, steps_then = time.monotonic(), self.steps
        while not stop.is_set():
            pause_step(self._counter, self._flush_priorities)
            try:  # a short wait, not a pausable one: held only above, its counts sent
                sample = batches.get(timeout=0.05)
            except queue.Empty:
                continue
            if isinstance(sample, BaseException):
                raise sample
            loss = self.update(flat_batch(sample.data), sample.info.probability, sample.info.key)
            if stop.is_set():  # the counter may be gone: a call to it would wait
                break
            try:
                counts = self._counter.increment(steps=1)
            except Stopping:
                break
            now = time.monotonic()
            rate = (self.steps - steps_then) / max(now - started, 1e-9)
            if now - started > 5.0:
                started, steps_then = now, self.steps
            learner_steps = counts.get("learner_steps", self.steps)
            self._logger.write({"loss": loss, "learner_steps": learner_steps, "steps_per_s": rate})

    def _flush_priorities(self) -> None:
        """Wait (a few seconds at most) until the new priorities handed over so far are in
        the replay: at a snapshot the replay then holds the priorities of the learner's
        step."""
        if self._priorities is not None:
            self._priorities.flush(PRIORITIES_FLUSH_S)

    def _sample_loop(self, address: str, stop: threading.Event, out: queue.Queue[Any]) -> None:
        """Feed ``out`` with sampled batches (overlapping sampling with the update) until the
        stop; an error that is not the replay going away at the stop is handed on. Its waits
        (the rate limiter, a full ``out``) are pausable: a snapshot holds it between them."""
        try:
            iterator = replay_dataset(address, self._batch_size)
            while not stop.is_set():
                topo.pausepoint()
                try:
                    with topo.pausable():
                        sample = next(iterator)
                except StopIteration:  # the rate limiter held samples back: retry
                    if not stop.is_set():
                        iterator = replay_dataset(address, self._batch_size)
                    continue
                while not stop.is_set():
                    with contextlib.suppress(queue.Full), topo.pausable():
                        out.put(sample, timeout=0.5)
                        break
        except Exception as exc:
            if not stop.is_set():
                out.put(exc)

    def _follow_primary(self, stop: threading.Event) -> None:
        while True:
            topo.pausepoint()
            try:
                with topo.pausable():  # a wait, then a fetch from the primary
                    if stop.wait(self._sync_every_s):
                        break
                    [params] = self._primary.get_variables(["params"])
            except Exception:
                if stop.is_set():
                    break
                raise
            with self._lock:
                self._state = self._state._replace(params=params)
                self._version += 1

    def _numpy_params(self) -> Any:
        """The online params as numpy, converted once per change (many actors ask)."""
        with self._lock:
            cached = self._numpy
            if cached is not None and cached[0] == self._version:
                return cached[1]
            state, version = self._state, self._version
        params = jax.device_get(state.params)
        with self._lock:
            self._numpy = (version, params)
        return params
