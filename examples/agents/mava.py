"""The nodes of Mava's DIAL system on the switch riddle (``examples/topologies/mava_dial.yaml``).

* ``make_replay_tables``: a Reverb queue of whole episodes: each is sampled once, in
  the order played, so every update sees a fresh batch (the paper trains on fresh
  batches of 32 episodes, not on a replay of old ones).
* ``Trainer``: takes batches of episodes, one DIAL step each (``examples.agents.dial``:
  it unrolls them with soft messages and the recorded DRU noise), serves
  ``get_variables`` (through the cachers when the topology has them).
* ``Executor``: plays ε-greedy episodes (ε = 0.05, messages through the DRU with noise,
  as in training) with the trainer's latest parameters, refreshed without blocking
  through its variable source, and inserts them, noise and messages included.
* ``Evaluator``: plays greedy episodes (hard bits) and reports the normalised reward:
  the return divided by the best return possible given who was interrogated when.

Nodes take ``counter`` as None when the topology has no counter (Mava's checkpoint off).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import Any

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import jax
import jax.numpy as jnp
import numpy as np
import reverb

import topo
from examples.agents.common import StopAware, Stopping, VariableClient, until_stopped
from examples.agents.dial import FIELDS, Config, Episode, Learning, make_learning, play_batch
from examples.agents.switch import SwitchGame, oracle_return
from topo.nodes import Counter

TABLE = "episodes"


def make_replay_tables(max_size: int = 128) -> list[reverb.Table]:
    """One queue of whole episodes: sampled in insertion order and removed once sampled;
    executors wait while it is full, so the trainer learns from episodes played with
    recent parameters and the executors cannot run far ahead of it on few cores."""
    return [reverb.Table.queue(TABLE, max_size)]


class Trainer:
    """DIAL's learner: whole episodes from the replay, one jitted update per batch."""

    def __init__(
        self,
        replay: Any,
        counter: Any = None,
        num_agents: int = 3,
        batch_size: int = 32,
        seed: int = 0,
        learning_rate: float = 5e-4,
        target_period: int = 100,
    ) -> None:
        self._replay = replay
        self._counter = Counter(
            parent=None if counter is None else StopAware(counter), prefix="trainer"
        )
        self._cfg = Config(
            num_agents=num_agents, learning_rate=learning_rate, target_period=target_period
        )
        self._batch_size = batch_size
        self._seed = seed
        self._learning: Learning | None = None
        self._state: Any = None
        self._lock = threading.Lock()
        self._ready = threading.Event()
        self._log = topo.metrics.logger("trainer", every_s=1.0)
        self.variable_requests = 0  # get_variables calls answered (what cachers save)

    def _setup(self) -> None:
        # JAX runs here, in the node's own process, never at import (the fork server).
        self._learning = make_learning(self._cfg)
        self._state = self._learning.init(jax.random.PRNGKey(self._seed))
        self._ready.set()

    def get_variables(self, names: list[str] | None = None) -> list[Any]:
        """The current parameters as numpy trees, one per requested name (Acme/Mava style)."""
        self._ready.wait()
        with self._lock:
            self.variable_requests += 1
            params = jax.device_get(self._state.params)
        return [params for _ in names or ["policy"]]

    def _replay_size(self) -> int:
        info = self._replay.server_info(timeout=5)
        return int(info[TABLE].current_size)

    def _sample(self) -> Episode:
        # Each sample is one inserted episode, its fields with a leading item axis of 1;
        # the queue hands out each episode once, oldest first.
        samples = list(self._replay.sample(TABLE, self._batch_size, emit_timesteps=False))
        columns = zip(*(s.data for s in samples), strict=True)
        return Episode(*(jnp.asarray(np.concatenate(c)) for c in columns))

    def run(self) -> None:
        """Train until the program stops."""
        self._setup()
        assert self._learning is not None
        stop = topo.stop_event()
        while self._replay_size() < self._batch_size:
            if stop.wait(0.2):
                return
        start, steps = time.monotonic(), 0
        while not stop.is_set():
            batch = until_stopped(self._sample, stop)
            if batch is None:  # the program is stopping (a sample may hang on a closed replay)
                return
            state, loss = self._learning.update(self._state, batch)
            with self._lock:
                self._state = state
            steps += 1
            try:
                counts = self._counter.increment(steps=1)
            except Stopping:  # the counter may be gone
                return
            self._log.write(
                {
                    "loss": float(loss),
                    "trainer_steps": counts.get("trainer_steps", steps),
                    "steps_per_s": steps / max(time.monotonic() - start, 1e-9),
                    "variable_requests": self.variable_requests,
                }
            )


class Executor:
    """Plays ε-greedy episodes and inserts them into the replay."""

    def __init__(
        self,
        executor_id: int,
        replay: Any,
        variable_source: Any,
        counter: Any = None,
        trainer: Any = None,
        num_agents: int = 3,
        epsilon: float = 0.05,
        episodes_per_round: int = 16,
        update_period: int = 1,
        seed: int = 0,
    ) -> None:
        self._id = executor_id
        self._replay = replay
        self._variables = VariableClient(variable_source, update_period)
        self._counter = Counter(
            parent=None if counter is None else StopAware(counter), prefix="executor"
        )
        self._cfg = Config(num_agents=num_agents)
        self._epsilon = epsilon
        self._round = max(1, episodes_per_round)
        self._seed = seed
        self._log = topo.metrics.logger("executor", every_s=1.0)

    def run(self) -> None:
        """Act until the program stops: play ``episodes_per_round`` episodes side by side
        (one network call per day for all of them), insert them, refresh the parameters."""
        learning = make_learning(self._cfg)
        base = self._seed * 10_000 + 1000 * self._id
        games = [SwitchGame(self._cfg.num_agents, seed=base + i) for i in range(self._round)]
        rng = np.random.default_rng(base)
        self._variables.update(wait=True)
        stop = topo.stop_event()
        returns: list[float] = []
        while not stop.is_set():
            data, totals = play_batch(learning, self._variables.params, games, self._epsilon, rng)
            for b in range(self._round):
                item = [data[f][b] for f in FIELDS]

                def insert(item: list[np.ndarray] = item) -> bool:
                    self._replay.insert(item, priorities={TABLE: 1.0})
                    return True

                # None: stopping while the full queue held the insert back.
                if until_stopped(insert, stop) is None:
                    return
            returns = [*returns, *totals.tolist()][-100:]
            try:
                counts = self._counter.increment(
                    steps=int(data["mask"].sum()), episodes=self._round
                )
            except Stopping:  # the counter may be gone
                return
            self._variables.update()
            self._log.write(
                {
                    "episode_return": float(totals.mean()),
                    "mean_return_100": float(np.mean(returns)),
                    "epsilon": self._epsilon,
                    "executor_steps": counts.get("executor_steps", 0),
                }
            )


class Evaluator:
    """Plays greedy episodes every ``every_s`` seconds and reports the normalised reward."""

    def __init__(
        self,
        variable_source: Any,
        counter: Any = None,
        trainer: Any = None,
        num_agents: int = 3,
        episodes: int = 1000,
        exact_up_to: int = 5000,
        every_s: float = 5.0,
        seed: int = 0,
    ) -> None:
        self._source = variable_source
        self._counter = counter
        self._cfg = Config(num_agents=num_agents)
        self._episodes = episodes
        self._exact_up_to = exact_up_to
        self._every_s = every_s
        self._seed = seed
        self._log = topo.metrics.logger("evaluator")
        self._params: Any = None
        self._counts: dict[str, Any] = {}
        self.normalised_reward: float | None = None

    def evaluate(self, learning: Learning, params: Any) -> float:
        """Normalised reward of the greedy policy (messages as hard bits): exactly, over
        every schedule of who is interrogated when if there are at most
        ``exact_up_to`` of them (729 for 3 prisoners), else over ``episodes`` drawn ones."""
        n, limit = self._cfg.num_agents, self._cfg.limit
        if n**limit <= self._exact_up_to:
            schedules = [list(s) for s in itertools.product(range(n), repeat=limit)]
        else:
            draw = np.random.default_rng(self._seed + 7)
            schedules = [list(draw.integers(n, size=limit)) for _ in range(self._episodes)]
        games = [SwitchGame(n, schedule=s) for s in schedules]
        _, returns = play_batch(
            learning, params, games, 0.0, np.random.default_rng(self._seed), training=False
        )
        best = sum(oracle_return(s, n) for s in schedules)
        return float(returns.sum()) / max(best, 1.0)

    def _once(self, learning: Learning, final: bool) -> bool:
        """One evaluation; True when it was the final one. A round that the stop overtook
        counts as the final one (its parameters are the last fetched): a second full
        evaluation took several seconds under load, and the node was killed after the
        grace with no final score."""
        # At the stop the trainer may already be gone: then the final score is of the
        # last parameters fetched.
        source, counter = self._source, self._counter
        if final and hasattr(source, "with_timeout"):
            source = source.with_timeout(2.0)  # inside the stop's grace period
            counter = None if counter is None else counter.with_timeout(2.0)
        elif not final:  # a round under way when the program stops gives way to the final one
            source = StopAware(source)
            counter = None if counter is None else StopAware(counter)
        try:
            self._params = source.get_variables(["policy"])[0]
            if counter is not None:
                self._counts = counter.get_counts()
        except Stopping:
            return False
        except (topo.PeerUnavailable, TimeoutError):
            if not final or self._params is None:
                raise
        score = self.normalised_reward = self.evaluate(learning, self._params)
        final = final or topo.stop_event().is_set()
        steps = int(self._counts.get("executor_steps", 0))
        episodes = int(self._counts.get("executor_episodes", 0))
        self._log.write(
            {"normalised_reward": score, "executor_steps": steps, "executor_episodes": episodes}
        )
        label = "final normalised reward" if final else "normalised reward"
        print(f"{label}: {score:.3f} after {steps} executor steps", flush=True)
        return final

    def run(self) -> None:
        """Evaluate periodically, and once more when the program stops (unless the stop
        came during an evaluation: that one is the final)."""
        learning = make_learning(self._cfg)
        while not topo.wait_for_stop(self._every_s):
            if self._once(learning, final=False):
                return
        self._once(learning, final=True)
