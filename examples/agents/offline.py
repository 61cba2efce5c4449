"""Acme's distributed offline agent: behaviour cloning or CRR on a fixed dataset, on
CartPole by default or any environment with discrete actions (``env``, as the DQN
examples name it; the networks' outputs come from its spec, their inputs from the data).

``examples/topologies/acme_offline.yaml`` runs it as make_distributed_offline_experiment
does: a ``Learner`` trains on batches of transitions from a dataset factory (a YAML
argument, by default ``examples.agents.demonstrations:transition_dataset``, the episodes
a mix of good, mediocre and random policies played; Acme's
``demonstration_dataset_factory(random_key)``) with a learning rule of
``offline_learners`` (``bc`` or ``crr``), counts ``learner_steps`` into the program's
counter and serves ``get_variables``; ``Evaluator`` nodes play greedy episodes with its
policy's parameters; an optional ``ModelSaver`` snapshots them to ``.npz`` files.

Every node is snapshot-ready (issue 29): the learner's and the evaluator's ``save()``/
``restore()`` carry their learning state, their loops pass ``topo.pausepoint()`` between
steps and their waits on other nodes are inside ``topo.pausable()``.

Importing this module imports jax/haiku/optax but runs no JAX computation (the procs
backend forks from a process that imported it). Nothing is module-global per node:
several nodes may share a process as threads.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

import topo
from examples.agents import offline_learners
from examples.agents.common import Policy, VariableClient, make_environment, run_episode
from examples.agents.demonstrations import Batch, int_seed, key_seed
from examples.agents.envs import DEFAULT, spec_of
from examples.agents.node_state import fill_tree, numpy_leaves, pause_step
from examples.agents.offline_saver import (
    ModelSaver,
    _node_id,
    _stop_event,
    _with_deadline,
    load_snapshot,
    save_snapshot,
)
from topo.nodes import Counter
from topo.targets import import_target

Params = Any  # a haiku parameter tree: {module: {name: array}}
DatasetFactory = Callable[..., Iterator[Batch]]
DEFAULT_DATASET = "examples.agents.demonstrations:transition_dataset"
STOP_DEADLINE_S = 2.0  # RPCs made while the program stops: its peers may be gone already
# At the stop a learner that serves parameters waits this long for one more fetch (the
# evaluator's final evaluation) before it ends: the final evaluation plays the final
# parameters, however many steps the learner made since the evaluator's last refresh.
FINAL_FETCH_WAIT_S = 2.0
COUNTER_DEADLINE_S = 4.0  # under the default 5 s stop grace period
SHOWN = ("loss", "accuracy", "critic_loss", "mean_q_target")  # printed learner metrics
RPC_ERRORS = (ConnectionError, TimeoutError)  # topo's PeerUnavailable, DeadlineExceeded
__all__ = ["Evaluator", "Learner", "ModelSaver", "greedy_policy", "load_snapshot", "save_snapshot"]


# -- the network ------------------------------------------------------------------------

make_network = offline_learners.make_network  # the policy network (evaluators play it)


def greedy_policy(params: Params) -> Policy:
    """The policy playing the highest-logit action of ``make_network``'s MLP, computed
    with numpy from the parameters alone (their shapes give the layer sizes): an actor's
    step costs microseconds instead of a JAX dispatch."""
    layers = sorted(params.items(), key=lambda item: int(item[0].rpartition("_")[2]))
    weights = [(np.asarray(p["w"], np.float32), np.asarray(p["b"], np.float32)) for _, p in layers]

    def policy(observation: np.ndarray) -> int:
        h = np.asarray(observation, np.float32)
        for i, (w, b) in enumerate(weights):
            h = h @ w + b
            if i < len(weights) - 1:
                h = np.maximum(h, 0.0)
        return int(np.argmax(h))

    return policy


# -- helpers for node code ---------------------------------------------------------------


def to_numpy(tree: Any) -> Any:
    """A copy of a JAX tree as numpy arrays (what travels over RPC and into snapshots)."""
    return jax.tree_util.tree_map(np.asarray, jax.device_get(tree))


# -- the nodes -----------------------------------------------------------------------------


def _check_data(batch: Batch, env: str) -> None:
    """Refuse a dataset that was not played on ``env``: its observations' size or its
    actions do not fit the environment the evaluators play."""
    spec = spec_of(env)
    size = int(np.prod(np.shape(batch["observation"])[1:]))
    if size != spec.observation_size:
        raise ValueError(
            f"the dataset's observations have {size} values, {env}'s have "
            f"{spec.observation_size}: give a dataset played on {env} (-p dataset=module:factory)"
        )
    actions = np.asarray(batch["action"])
    if actions.size and (actions.min() < 0 or actions.max() >= spec.num_actions):
        raise ValueError(
            f"the dataset's actions go from {actions.min()} to {actions.max()}, {env} has "
            f"actions 0 to {spec.num_actions - 1}: give a dataset played on {env}"
        )


class Learner:
    """An offline learner on a fixed dataset: behaviour cloning (``algorithm="bc"``,
    Acme's BCLearner) or CRR (``"crr"``, Acme's CRRLearner), from
    ``offline_learners``; ``run()`` steps until the program stops;
    ``get_variables(["policy"])`` serves the policy's parameters.

    Snapshots: :meth:`save` is its whole training state (the networks, the optimizers'
    states, the step) and, when the dataset iterator can tell (``save``/``restore``, as
    :func:`examples.agents.demonstrations.transition_dataset`'s can), where the iterator
    is: a restored learner's next step draws the batch the saved one would have drawn
    and makes the same update. Pause point: between two steps, where the counter is sent
    its batched steps first; the wait for the counter at start is pausable."""

    def __init__(
        self,
        random_key: Any,
        counter: Any = None,
        dataset: str | DatasetFactory = DEFAULT_DATASET,
        dataset_args: Mapping[str, Any] | None = None,
        hidden_sizes: Sequence[int] = (64, 64),
        learning_rate: float = 1e-3,
        algorithm: str = "bc",
        algorithm_args: Mapping[str, Any] | None = None,
        log_every_s: float = 1.0,
        print_every_s: float = 2.0,
        env: str = DEFAULT,
    ) -> None:
        key = jnp.asarray(key_seed(random_key), dtype=jnp.uint32)
        dataset_key, init_key = jax.random.split(key)
        factory = import_target(dataset) if isinstance(dataset, str) else dataset
        self._iterator = iter(factory(np.asarray(dataset_key), **dict(dataset_args or {})))
        self._algorithm = offline_learners.make_algorithm(
            algorithm,
            tuple(hidden_sizes),
            learning_rate,
            **{"num_actions": spec_of(env).num_actions, **dict(algorithm_args or {})},
        )
        first = next(self._iterator)
        _check_data(first, env)
        self._state = self._algorithm.init(init_key, first)
        # Counts go to the program's counter as ``learner_steps`` (at most once a second),
        # with a deadline under the stop grace period so a stop never waits on it.
        self._parent = counter
        self._counter = Counter(_with_deadline(counter, COUNTER_DEADLINE_S), prefix="learner")
        self._stop = _stop_event()
        self._warned = False
        self._logger = topo.metrics.logger("learner")
        self._log_every_s = log_every_s
        self._print_every_s = print_every_s
        self._steps = 0
        self._last_log = (time.monotonic(), 0)
        self._last_print = time.monotonic()
        self._variables: tuple[int, Params] | None = None  # (steps, numpy params) cache
        self._lock = threading.Lock()
        self._fetched_at: float | None = None  # when parameters were last fetched
        self._fetched_after_stop = threading.Event()

    @property
    def steps(self) -> int:
        """Learner steps taken (restored ones included)."""
        return self._steps

    def step(self) -> dict[str, float]:
        """One behaviour-cloning step on the next batch; its metrics when a log row is due."""
        self._state, metrics = self._algorithm.step(self._state, next(self._iterator))
        self._steps += 1
        try:
            self._counter.increment(steps=1)
        except RPC_ERRORS as exc:  # the counter is gone (stopping) or slow: keep learning
            if not self._stop.is_set() and not self._warned:
                self._warned = True
                print(f"{_node_id('learner')}: counter not reached ({exc}); going on", flush=True)
        now = time.monotonic()
        if now - self._last_log[0] < self._log_every_s:
            return {}
        return self._log(metrics, now)

    def _log(self, metrics: Mapping[str, jax.Array], now: float) -> dict[str, float]:
        then, steps_then = self._last_log
        self._last_log = (now, self._steps)
        row = {k: float(v) for k, v in metrics.items()}
        row["learner_steps"] = self._steps
        row["steps_per_s"] = (self._steps - steps_then) / max(now - then, 1e-9)
        self._logger.write(row)
        if now - self._last_print >= self._print_every_s:
            self._last_print = now
            shown = "  ".join(f"{k} {v:.4g}" for k, v in row.items() if k in SHOWN)
            print(
                f"{_node_id('learner')}: step {self._steps}  {shown}  "
                f"{row['steps_per_s']:.0f} steps/s",
                flush=True,
            )
        return row

    def run(self, num_steps: int | None = None) -> None:
        """Step until the program stops (or ``num_steps`` steps, when given)."""
        if self._parent is not None:  # wait for the counter to be up (the default deadline)
            try:
                with topo.pausable():
                    self._parent.get_counts()
            except RPC_ERRORS:
                pass
        done = 0
        while not self._stop.is_set() and (num_steps is None or done < num_steps):
            pause_step(self._counter)
            self.step()
            done += 1
        if self._stop.is_set():
            print(f"{_node_id('learner')}: stopped after {self._steps} steps", flush=True)
            if self._fetched_at is not None:  # a variable client follows: hand it the last
                self._fetched_after_stop.wait(FINAL_FETCH_WAIT_S)

    def get_variables(self, names: Sequence[str]) -> list[Params]:
        """Acme's ``get_variables``: one entry per name; ``"policy"`` is the parameters."""
        unknown = [n for n in names if n != "policy"]
        if unknown:
            raise KeyError(f"unknown variables {unknown}: this learner serves ['policy']")
        with self._lock:
            state, steps = self._state, self._steps
            if self._variables is None or self._variables[0] != steps:
                self._variables = (steps, to_numpy(self._algorithm.policy_params(state)))
            found = [self._variables[1] for _ in names]
        self._fetched_at = time.monotonic()
        if self._stop.is_set():
            self._fetched_after_stop.set()
        return found

    def save(self) -> dict[str, Any]:
        """A checkpointable copy of the learner: its whole training state (networks,
        optimizer states) as numpy leaves, the steps, and the dataset iterator's position
        when it has one to give (else None)."""
        with self._lock:
            state, steps = self._state, self._steps
        saver = getattr(self._iterator, "save", None)
        dataset = saver() if callable(saver) else None
        return {"state": numpy_leaves(state), "steps": steps, "dataset": dataset}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue from a ``save()`` copy (refused, naming the misfit, when it is of a
        learner with another learning rule or network)."""
        restored = fill_tree(self._state, list(state["state"]), "learner")
        dataset = state.get("dataset")
        resume = getattr(self._iterator, "restore", None)
        if dataset is not None and callable(resume):
            resume(dataset)
        with self._lock:
            self._steps = int(state["steps"])
            self._state = restored
            self._variables = None
            self._counter.restore({"steps": self._steps})


class Evaluator:
    """Plays greedy episodes with the learner's latest parameters every ``every_s`` seconds
    (Acme's evaluator loop), logs and prints the mean return; a final evaluation at stop.

    Snapshots: its episode seeds follow from the rounds played, so :meth:`save` keeps
    that count (and its own episode count), and a restored evaluator plays the seeds
    the saved one would have played next. Pause points: between two episodes and
    between two refreshes; the waits and the fetches from the learner and the counter
    are pausable."""

    def __init__(
        self,
        random_key: Any,
        variable_source: Any,
        counter: Any = None,
        episodes: int = 10,
        every_s: float = 5.0,
        refresh_s: float = 1.0,
        final_within_s: float = 1.5,
        env: str = DEFAULT,
    ) -> None:
        self._source = variable_source
        self._final_within_s = final_within_s
        self._client = VariableClient(_with_deadline(variable_source, STOP_DEADLINE_S))
        self._counter = Counter(
            _with_deadline(counter, STOP_DEADLINE_S), prefix="evaluator", time_delta=0.0
        )
        self._env = make_environment(env=env)
        self._seed = int_seed(random_key) // 2  # room for the episode seeds above it
        self._episodes = episodes
        self._every_s = every_s
        self._refresh_s = refresh_s
        self._stop = _stop_event()
        self._logger = topo.metrics.logger("evaluator")
        self._counts: dict[str, Any] = {}
        self._rounds = 0
        self.results: list[dict[str, Any]] = []

    def evaluate(self, final: bool = False) -> dict[str, Any] | None:
        """Play ``episodes`` greedy episodes with the parameters held now; log, print and
        return the row. None while no parameters have arrived, and for a round the stop
        interrupts (the final evaluation replaces it). The final one plays what fits in
        ``final_within_s`` (at least one episode): it must end inside the stop's grace
        period on a busy machine."""
        params = self._client.params
        if params is None:
            return None
        policy = greedy_policy(params)
        seed = self._seed + self._rounds * self._episodes
        self._rounds += 1
        start = time.monotonic()
        returns: list[float] = []
        for i in range(self._episodes):
            if final and returns and time.monotonic() - start > self._final_within_s:
                break
            if not final:
                pause_step(self._counter)
            if self._stop.is_set() and not final:
                return None
            returns.append(run_episode(self._env, policy, seed + i))
        elapsed = time.monotonic() - start
        if not self._stop.is_set():  # at stop the counter may be gone: keep the last counts
            self._update_counts(lambda: self._counter.increment(episodes=self._episodes))
        mean = float(np.mean(returns))
        row = {
            "episode_return": mean,
            "episode_return_min": min(returns),
            "episodes": len(returns),
            "learner_steps": int(self._counts.get("learner_steps", 0)),
            "final": final,
        }
        self._logger.write(row)
        self.results.append(row)
        what = "final evaluation" if final else "evaluation"
        print(
            f"{_node_id('evaluator')}: {what} at learner_steps {row['learner_steps']}: "
            f"mean return {mean:.1f} over {len(returns)} episodes ({elapsed:.1f}s)",
            flush=True,
        )
        return row

    def _update_counts(self, counts: Callable[[], dict[str, Any]]) -> None:
        """Keep what ``counts()`` returns (the program's counts), or the last ones."""
        try:
            self._counts = counts()
        except RPC_ERRORS:
            pass

    def save(self) -> dict[str, Any]:
        """The rounds played (they set the next episode seeds) and the episodes counted."""
        return {"rounds": self._rounds, "counts": self._counter.save()}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue after the rounds of a saved evaluator."""
        self._rounds = int(state["rounds"])
        self._counter.restore(dict(state["counts"]))

    def _refresh(self) -> None:
        """Fetch the learner's parameters and the counts, keeping the old ones when a peer
        cannot answer (the first fetch waits, up to the default deadline, for the learner)."""
        with topo.pausable():
            try:
                if self._client.params is None:
                    self._client.params = self._source.get_variables(["policy"])[0]
                else:
                    self._client.update(wait=True)
            except RPC_ERRORS:
                pass
            if not self._stop.is_set():  # at the stop the counter may be gone already
                self._update_counts(self._counter.get_counts)

    def _final_fetch(self) -> None:
        """At the stop: the learner's final parameters (it waits for this fetch), within
        the stop deadline; the ones held are kept when it is gone already."""
        if self._client.params is None:
            return
        try:
            self._client.update(wait=True)
        except RPC_ERRORS:
            pass

    def run(self) -> None:
        """Evaluate every ``every_s`` seconds until the program stops, refreshing the
        parameters every ``refresh_s`` seconds in between, so that the final evaluation at
        stop plays the learner's final parameters (fetched once more at the stop; the
        learner waits for that fetch, up to ``FINAL_FETCH_WAIT_S``)."""
        while not self._stop.is_set():
            self._refresh()
            self.evaluate()
            next_round = time.monotonic() + self._every_s
            while time.monotonic() < next_round:
                pause_step(self._counter)
                with topo.pausable():
                    wait = min(self._refresh_s, max(next_round - time.monotonic(), 0))
                    if self._stop.wait(wait):
                        break
                self._refresh()
        self._final_fetch()
        self.evaluate(final=True)
