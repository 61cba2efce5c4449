"""The DQN agent's actor: epsilon-greedy on its environment, n-step transitions into Reverb.

:mod:`examples.agents.dqn` re-exports :class:`Actor` (topologies name it
``examples.agents.dqn:Actor``). No JAX runs at import.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np
import tensorflow as tf

import topo
from examples.agents.common import StopAware, VariableClient, make_environment, until_stopped
from examples.agents.dqn_core import (
    TABLE,
    NStep,
    apex_epsilon,
    epsilon_greedy,
    numpy_layers,
    seed_of,
)
from examples.agents.envs import DEFAULT
from examples.agents.node_state import (
    CountSender,
    env_rng_state,
    pause_step,
    rng_state,
    set_env_rng_state,
    set_rng_state,
)
from topo.nodes import Counter

# An actor waits this long at most for its last items' confirmation at the stop: the
# replay releases held-back writers for 2 s at most (topo.nodes.reverb_jail.DRAIN_S), so
# a longer wait gains nothing, and on a loaded machine (the stop heard late) it took the
# actor past the 5 s grace period.
FLUSH_AT_STOP_S = 2.0


class Actor:
    """Acts epsilon-greedily on environment ``env`` (:mod:`examples.agents.envs`) and
    writes n-step transitions into the replay.

    ``epsilon`` None gives Ape-X's per-actor value (:func:`dqn_core.apex_epsilon` of
    ``actor_id`` among ``num_actors``). It asks its variable client for an update every
    step; the client fetches from ``variable_source`` in the background every
    ``update_period`` steps, and the actor acts on new parameters from the step after
    they arrive.

    Snapshots: :meth:`save` keeps its random stream, its environment's start-state
    stream and the step and episode counts it sent to the counter, so a restored actor
    draws what the saved one would have drawn next instead of repeating its first
    episodes, and its counts are the counter's; it fetches fresh parameters at start as
    always. Episodes are counted when they end, sent at most once a second and at once
    at a pause point (:class:`node_state.CountSender`), so wherever it is held the
    counter has what it saves. Pause points: every
    environment step; the first (blocking) fetch and each write into the replay (held
    by its rate limiter while the learner is behind) are pausable waits. The variable
    client's background fetch changes nothing the actor saves (its answer is adopted at
    a step), so that thread takes no part."""

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
        env: str = DEFAULT,
    ) -> None:
        seed = seed_of(random_key)
        self.actor_id = actor_id
        self.epsilon = apex_epsilon(actor_id, num_actors) if epsilon is None else epsilon
        self._replay = replay
        self._env = make_environment(seed, env)
        self._rng = np.random.default_rng(seed)
        self._variables = VariableClient(variable_source, update_period, key="policy")
        parent = None if counter is None else StopAware(counter)
        self._counts = CountSender(Counter(parent, "actor", time_delta=0.0))
        self._nstep = NStep(n_step, discount)
        self._logger = topo.metrics.logger("actor", every_s=log_every_s)
        self._layers_of: Any = None  # the params self._layers were converted from
        self._layers: list[tuple[np.ndarray, np.ndarray]] = []
        self.steps = 0
        self.episodes = 0

    def save(self) -> dict[str, Any]:
        """Where the actor's random streams are, and its counts (small, numpy-free)."""
        sent = self._counts.sent
        return {
            "rng": rng_state(self._rng),
            "env_rng": env_rng_state(self._env),
            "steps": sent.get("steps", 0),
            "episodes": sent.get("episodes", 0),
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue the streams and counts of a saved actor (before ``run``)."""
        set_rng_state(self._rng, state["rng"])
        set_env_rng_state(self._env, state["env_rng"])
        self.steps, self.episodes = int(state["steps"]), int(state["episodes"])
        self._counts.restore({"steps": self.steps, "episodes": self.episodes})

    def run(self) -> None:
        """Act until the program stops."""
        self.run_loop(topo.stop_event())

    def run_loop(self, stop: threading.Event, max_steps: int | None = None) -> None:
        """The actor loop, also usable outside topo (``stop`` is any event): episodes until
        ``stop`` is set or ``max_steps`` steps were taken. At the stop the replay and the
        counter go away with the program: writes refused then end the loop quietly, and
        nothing is counted after the stop (a call to a stopped counter would wait)."""
        with topo.pausable():
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
                counts = self._counts.add(steps=length, episodes=1)
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
            pause_step(None, self._counts.flush)
            action = epsilon_greedy(self._policy(), observation, self.epsilon, self._rng)
            next_obs, reward, terminated, truncated, _ = self._env.step(action)
            transitions = self._nstep.add(
                observation, action, float(reward), next_obs, terminated, truncated
            )
            if transitions:
                with topo.pausable():  # the rate limiter holds inserts while the learner lags
                    for transition in transitions:
                        writer.append(transition)
                        # priority 1.0, as Acme's actors give (the learner's TD errors
                        # then set it; they are often larger)
                        writer.create_item(TABLE, 1, 1.0)
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
