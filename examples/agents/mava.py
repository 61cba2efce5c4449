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

Snapshot-ready (issue 29): the trainer and the executors ``save()``/``restore()`` their
learning state; every loop passes ``topo.pausepoint()`` between steps and the waits on
other nodes (samples from the queue while it is empty, inserts while it is full, the
first parameter fetch) are inside ``topo.pausable()``.
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
from examples.agents.common import StopAware, Stopping, VariableClient
from examples.agents.dial import FIELDS, Config, Episode, Learning, make_learning, play_batch
from examples.agents.node_state import (
    fill_tree,
    numpy_leaves,
    pause_step,
    rng_state,
    set_rng_state,
    wait_pausing,
)
from examples.agents.switch import SwitchGame, oracle_return
from topo.nodes import Counter

TABLE = "episodes"


def make_replay_tables(max_size: int = 128) -> list[reverb.Table]:
    """One queue of whole episodes: sampled in insertion order and removed once sampled;
    executors wait while it is full, so the trainer learns from episodes played with
    recent parameters and the executors cannot run far ahead of it on few cores."""
    return [reverb.Table.queue(TABLE, max_size)]


class Trainer:
    """DIAL's learner: whole episodes from the replay, one jitted update per batch.

    Snapshots: :meth:`save` is its training state (parameters, target parameters, the
    optimiser's state, the step; the update has no randomness of its own: the DRU noise
    comes with the episodes). Pause points: between two updates and while a sample from
    the queue waits for the executors to fill it (the counter is sent its batched steps
    first); the wait for the first batch is pausable."""

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
        self._setup_lock = threading.Lock()
        self._ready = threading.Event()
        self._log = topo.metrics.logger("trainer", every_s=1.0)
        self.variable_requests = 0  # get_variables calls answered (what cachers save)

    def _setup(self) -> None:
        # JAX runs here, in the node's own process, never at import (the fork server);
        # once, whoever comes first (run, or a restore or save before it).
        with self._setup_lock:
            if self._learning is not None:
                return
            self._learning = make_learning(self._cfg)
            self._state = self._learning.init(jax.random.PRNGKey(self._seed))
            self._ready.set()

    @property
    def steps(self) -> int:
        """Updates made (restored ones included)."""
        self._setup()
        return int(self._state.steps)

    def save(self) -> dict[str, Any]:
        """The whole training state as numpy arrays (the leaves of params, target params,
        optimiser state, step) and the step count."""
        self._setup()
        with self._lock:
            state = self._state
        return {"state": numpy_leaves(state), "steps": int(state.steps)}

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue from a ``save()``: the next update is the one the saved trainer would
        have made next (refused, naming the misfit, for another network size)."""
        self._setup()
        state = fill_tree(self._state, list(saved["state"]), "DIAL trainer")
        with self._lock:
            self._state = state
        self._counter.restore({"steps": int(saved["steps"])})

    def update(self, batch: Episode) -> float:
        """One DIAL update on ``batch``; its loss."""
        self._setup()
        assert self._learning is not None
        state, loss = self._learning.update(self._state, batch)
        with self._lock:
            self._state = state
        return float(loss)

    def get_variables(self, names: list[str] | None = None) -> list[Any]:
        """The current parameters as numpy trees, one per requested name (Acme/Mava style)."""
        self._setup()
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
        with topo.pausable():
            while self._replay_size() < self._batch_size:
                if stop.wait(0.2):
                    return
        start, steps = time.monotonic(), 0
        while not stop.is_set():
            pause_step(self._counter)
            # The queue holds a sample until executors filled it: held meanwhile.
            batch = wait_pausing(self._sample, stop, self._counter)
            if batch is None:  # the program is stopping (a sample may hang on a closed replay)
                return
            loss = self.update(batch)
            steps += 1
            try:
                counts = self._counter.increment(steps=1)
            except Stopping:  # the counter may be gone
                return
            self._log.write(
                {
                    "loss": loss,
                    "trainer_steps": counts.get("trainer_steps", steps),
                    "steps_per_s": steps / max(time.monotonic() - start, 1e-9),
                    "variable_requests": self.variable_requests,
                }
            )


class Executor:
    """Plays ε-greedy episodes and inserts them into the replay.

    Snapshots: :meth:`save` keeps its random stream (exploration and DRU noise), each
    game's stream of who is interrogated, and its step and episode counts: a restored
    executor plays the episodes the saved one would have played next. A round is counted
    (its own counts and the counter's) once inserted, so they agree at every pause
    point. Pause points: between two rounds and while an insert waits for room in the
    full queue; the first (blocking) parameter fetch is pausable."""

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
        base = seed * 10_000 + 1000 * executor_id
        self._games = [SwitchGame(num_agents, seed=base + i) for i in range(self._round)]
        self._rng = np.random.default_rng(base)
        self.steps = 0
        self.episodes = 0

    def save(self) -> dict[str, Any]:
        """Where its random streams are, and its counts (small, numpy-free)."""
        return {
            "rng": rng_state(self._rng),
            "games": [game.save() for game in self._games],
            "steps": self.steps,
            "episodes": self.episodes,
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Continue the streams and counts of a saved executor (before ``run``)."""
        if len(state["games"]) != len(self._games):
            raise ValueError(
                f"this checkpoint is of an executor playing {len(state['games'])} episodes a "
                f"round; this one plays {len(self._games)} (episodes_per_round)"
            )
        set_rng_state(self._rng, state["rng"])
        for game, game_state in zip(self._games, state["games"], strict=True):
            game.restore(game_state)
        self.steps, self.episodes = int(state["steps"]), int(state["episodes"])
        self._counter.restore({"steps": self.steps, "episodes": self.episodes})

    def play_round(self, learning: Learning) -> tuple[dict[str, np.ndarray], np.ndarray]:
        """One round: ``episodes_per_round`` episodes side by side with the parameters held
        now (its fields and returns, as ``play_batch``)."""
        return play_batch(learning, self._variables.params, self._games, self._epsilon, self._rng)

    def run(self) -> None:
        """Act until the program stops: play ``episodes_per_round`` episodes side by side
        (one network call per day for all of them), insert them, refresh the parameters."""
        learning = make_learning(self._cfg)
        with topo.pausable():
            self._variables.update(wait=True)
        stop = topo.stop_event()
        returns: list[float] = []
        while not stop.is_set():
            pause_step(self._counter)
            data, totals = self.play_round(learning)
            for b in range(self._round):
                item = [data[f][b] for f in FIELDS]

                def insert(item: list[np.ndarray] = item) -> bool:
                    self._replay.insert(item, priorities={TABLE: 1.0})
                    return True

                # None: stopping while the full queue held the insert back.
                if wait_pausing(insert, stop, self._counter) is None:
                    return
            returns = [*returns, *totals.tolist()][-100:]
            steps = int(data["mask"].sum())
            self.steps += steps
            self.episodes += self._round
            try:
                counts = self._counter.increment(steps=steps, episodes=self._round)
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
    """Plays greedy episodes every ``every_s`` seconds and reports the normalised reward.
    With ``stop_at_reward`` set, the first evaluation that reaches it is the final one
    and stops the program.

    Snapshots: nothing to keep (no ``save``/``restore``): every evaluation plays the same
    schedules with the same seed, whatever came before. Pause point: between two
    evaluations; the wait and the fetches of the parameters and counts are pausable."""

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
        stop_at_reward: float | None = None,
    ) -> None:
        self._source = variable_source
        self._stop_at_reward = stop_at_reward
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
            with topo.pausable():
                self._params = source.get_variables(["policy"])[0]
                if counter is not None:
                    self._counts = counter.get_counts()
        except Stopping:
            return False
        except (topo.PeerUnavailable, TimeoutError):
            if not final or self._params is None:
                raise
        score = self.normalised_reward = self.evaluate(learning, self._params)
        reached = not final and self._stop_at_reward is not None and score >= self._stop_at_reward
        final = final or reached or topo.stop_event().is_set()
        steps = int(self._counts.get("executor_steps", 0))
        episodes = int(self._counts.get("executor_episodes", 0))
        self._log.write(
            {"normalised_reward": score, "executor_steps": steps, "executor_episodes": episodes}
        )
        label = "final normalised reward" if final else "normalised reward"
        print(f"{label}: {score:.3f} after {steps} executor steps", flush=True)
        if reached:  # this evaluation is the final one: no second, later one to differ
            reason = f"an evaluation reached stop_at_reward={self._stop_at_reward:g}"
            print(f"evaluator: {reason}: stopping the program", flush=True)
            topo.stop(f"the evaluator: {reason}")
        return final

    def run(self) -> None:
        """Evaluate periodically, and once more when the program stops (unless the stop
        came during an evaluation: that one is the final)."""
        learning = make_learning(self._cfg)
        while True:
            topo.pausepoint()
            with topo.pausable():
                if topo.wait_for_stop(self._every_s):
                    break
            if self._once(learning, final=False):
                return
        self._once(learning, final=True)
