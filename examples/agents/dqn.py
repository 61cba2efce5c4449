"""Distributed DQN on CartPole as topo nodes, laid out the way Acme lays out its agents
(``examples/topologies/acme_distributed.yaml`` and ``acme_colocated.yaml``).

- :class:`Learner` (served): samples n-step transitions from Reverb, takes jitted
  double-DQN steps (haiku MLP, optax adam, target network), updates priorities, counts
  ``learner_steps``; peers call ``get_variables``/``save``/``restore``. A secondary
  learner (``primary_learner`` set) starts from the primary's state and keeps syncing its
  parameters from it, serving ``get_variables`` to spread the actors' load.
- :class:`Actor`: epsilon-greedy (Ape-X epsilons per actor) on CartPole, writes
  transitions into Reverb, refreshes its parameters without blocking, counts
  ``actor_steps``.
- :class:`Evaluator`: the greedy policy every few seconds; prints and logs the mean return
  and prints ``final evaluation return: X`` when the program stops.
- :class:`ModelSaver`: snapshots the learner's parameters as ``.npz`` files.
  (These two live in :mod:`examples.agents.dqn_eval`.)

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
import tensorflow as tf

import topo
from examples.agents.common import (
    StopAware,
    Stopping,
    VariableClient,
    make_environment,
    until_stopped,
)
from examples.agents.dqn_core import (
    TABLE,
    NStep,
    apex_epsilon,
    epsilon_greedy,
    flat_batch,
    initial_state,
    make_network,
    make_optimizer,
    make_replay_tables,
    make_sgd_step,
    numpy_layers,
    replay_dataset,
    seed_of,
)
from examples.agents.dqn_eval import Evaluator, ModelSaver
from examples.agents.priorities import PrioritySender
from topo.nodes import Counter

__all__ = ["Actor", "Evaluator", "Learner", "ModelSaver", "make_replay_tables"]
log = logging.getLogger("examples.agents.dqn")
FLUSH_AT_STOP_S = 3.0  # an actor waits this long at most for its last items' confirmation
VARIABLE_NAMES = ("policy", "params")  # names get_variables answers with the online params


class Learner:
    """The DQN learner (see the module docstring). ``replay`` may be None for a learner
    driven by hand through :meth:`update` (tests)."""

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
    ) -> None:
        self._replay = replay
        self._primary = primary_learner
        self._batch_size = batch_size
        self._sync_every_s = sync_every_s
        self._network = make_network(hidden_sizes)
        self._optimizer = make_optimizer(learning_rate)
        self._sgd_step = make_sgd_step(
            self._network, self._optimizer, target_update_period, importance_sampling_exponent
        )
        self._state = initial_state(self._network, self._optimizer, seed_of(random_key))
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
        """The whole training state as numpy (params, target, optimizer state, steps)."""
        with self._lock:
            state = self._state
        return {"state": jax.device_get(state._asdict()), "steps": self.steps}

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue from a state that :meth:`save` returned."""
        fields = dict(saved["state"])
        with self._lock:
            self._state = type(self._state)(**jax.tree_util.tree_map(jax.numpy.asarray, fields))
            self.steps = int(saved.get("steps", int(fields["steps"])))
            self._version += 1

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
        threading.Thread(
            target=self._sample_loop,
            args=(self._replay.address(), stop, batches),
            name="dqn-sampler",
            daemon=True,  # a sample call stuck on a stopped replay must not hold the exit
        ).start()
        started, steps_then = time.monotonic(), self.steps
        while not stop.is_set():
            try:
                sample = batches.get(timeout=0.5)
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

    def _sample_loop(self, address: str, stop: threading.Event, out: queue.Queue[Any]) -> None:
        """Feed ``out`` with sampled batches (overlapping sampling with the update) until the
        stop; an error that is not the replay going away at the stop is handed on."""
        try:
            iterator = replay_dataset(address, self._batch_size)
            while not stop.is_set():
                try:
                    sample = next(iterator)
                except StopIteration:  # the rate limiter held samples back: retry
                    if not stop.is_set():
                        iterator = replay_dataset(address, self._batch_size)
                    continue
                while not stop.is_set():
                    with contextlib.suppress(queue.Full):
                        out.put(sample, timeout=0.5)
                        break
        except Exception as exc:
            if not stop.is_set():
                out.put(exc)

    def _follow_primary(self, stop: threading.Event) -> None:
        while not stop.wait(self._sync_every_s):
            try:
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


class Actor:
    """Acts epsilon-greedily on CartPole and writes n-step transitions into the replay.

    ``epsilon`` None gives Ape-X's per-actor value (:func:`dqn_core.apex_epsilon` of
    ``actor_id`` among ``num_actors``). It asks its variable client for an update every
    step; the client fetches from ``variable_source`` in the background every
    ``update_period`` steps, and the actor acts on new parameters from the step after
    they arrive."""

    def __init__(
        self,
        random_key: Any,
        replay: Any,
        variable_source: Any,
        counter: Any,
        actor_id: int = 0,
        *,
        num_actors: int = 1,
        epsilon: float | None = None,
        n_step: int = 3,
        discount: float = 0.99,
        update_period: int = 100,
        log_every_s: float = 1.0,
    ) -> None:
        seed = seed_of(random_key)
        self.actor_id = actor_id
        self.epsilon = apex_epsilon(actor_id, num_actors) if epsilon is None else epsilon
        self._replay = replay
        self._env = make_environment(seed)
        self._rng = np.random.default_rng(seed)
        self._variables = VariableClient(variable_source, update_period, key="policy")
        self._counter = Counter(None if counter is None else StopAware(counter), "actor")
        self._nstep = NStep(n_step, discount)
        self._logger = topo.metrics.logger("actor", every_s=log_every_s)
        self._layers_of: Any = None  # the params self._layers were converted from
        self._layers: list[tuple[np.ndarray, np.ndarray]] = []
        self.steps = 0
        self.episodes = 0

    def run(self) -> None:
        """Act until the program stops."""
        self.run_loop(topo.stop_event())

    def run_loop(self, stop: threading.Event, max_steps: int | None = None) -> None:
        """The actor loop, also usable outside topo (``stop`` is any event): episodes until
        ``stop`` is set or ``max_steps`` steps were taken. At the stop the replay and the
        counter go away with the program: writes refused then end the loop quietly, and
        nothing is counted after the stop (a call to a stopped counter would wait)."""
        self._variables.update(wait=True)  # the first fetch blocks, as in Acme
        started = time.monotonic()
        writer = self._replay.writer(max_sequence_length=1)
        try:
            while not stop.is_set() and (max_steps is None or self.steps < max_steps):
                length, total = self._episode(writer, stop)
                self.steps += length
                self.episodes += 1
                if stop.is_set():
                    break
                counts = self._counter.increment(steps=length, episodes=1)
                self._logger.write(
                    {
                        "episode_return": total,
                        "episode_length": length,
                        "epsilon": self.epsilon,
                        "steps": counts.get("actor_steps", self.steps),
                        "steps_per_s": self.steps / max(time.monotonic() - started, 1e-9),
                    }
                )
        except (RuntimeError, tf.errors.OpError):
            if not stop.is_set():
                raise
        finally:
            self._close(writer, stop)

    def _close(self, writer: Any, stop: threading.Event) -> None:
        """Flush, then close the writer. Items sent but not yet confirmed when a Reverb
        writer closes are reported as lost (``DATA_LOSS`` on the console): wait for their
        confirmation first, which at the stop the replay gives by releasing writers its
        rate limiter holds back; a flush still waiting after ``FLUSH_AT_STOP_S`` is
        abandoned with the writer (the replay is gone)."""
        if stop.is_set():
            flushed = until_stopped(lambda: writer.flush() or True, _Deadline(FLUSH_AT_STOP_S))
            if flushed is None:
                return  # a close now would wait on the same confirmations
        try:
            writer.close(retry_on_unavailable=not stop.is_set())
        except (RuntimeError, tf.errors.OpError):
            if not stop.is_set():
                raise

    def _policy(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The layers to act with: the variable client's latest parameters, converted to
        numpy once each time new ones arrive."""
        params = self._variables.params
        if params is not self._layers_of:
            self._layers_of, self._layers = params, numpy_layers(params)
        return self._layers

    def _episode(self, writer: Any, stop: threading.Event) -> tuple[int, float]:
        observation, _ = self._env.reset()
        length, total = 0, 0.0
        while True:
            action = epsilon_greedy(self._policy(), observation, self.epsilon, self._rng)
            next_obs, reward, terminated, truncated, _ = self._env.step(action)
            for transition in self._nstep.add(
                observation, action, float(reward), next_obs, terminated, truncated
            ):
                writer.append(transition)
                writer.create_item(TABLE, 1, 1.0)  # new items get top priority at first
            self._variables.update()
            observation = next_obs
            length += 1
            total += float(reward)
            if terminated or truncated or stop.is_set():
                return length, total


class _Deadline(threading.Event):
    """An event that is set ``seconds`` from now (a bound for :func:`until_stopped`)."""

    def __init__(self, seconds: float) -> None:
        super().__init__()
        self._end = time.monotonic() + seconds

    def is_set(self) -> bool:
        if not super().is_set() and time.monotonic() >= self._end:
            self.set()
        return super().is_set()
