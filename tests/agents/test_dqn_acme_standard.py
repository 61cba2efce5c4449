"""The DQN agent against Acme's standard: the double-Q n-step target with a discount and
the importance weights computed by hand, the new priorities reaching a real Reverb
table (none dropped), and an actor acting on parameters no older than its variable
client's update period."""

from __future__ import annotations

import importlib.util
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from topo.testing import wait_until

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)

DISCOUNT = 0.9**3  # a 3-step transition's bootstrap discount


@pytest.fixture(scope="module")
def dqn() -> SimpleNamespace:
    """The agent's modules, imported here and not at collection (see test_dqn_learner)."""
    import reverb

    from examples.agents import dqn, dqn_core

    return SimpleNamespace(dqn=dqn, core=dqn_core, reverb=reverb)


def batch_of(size: int, seed: int) -> dict[str, np.ndarray]:
    """Random transitions, half of them bootstrapping with a non-zero discount."""
    rng = np.random.default_rng(seed)
    return {
        "observation": rng.normal(size=(size, 4)).astype(np.float32),
        "action": rng.integers(0, 2, size=size).astype(np.int32),
        "reward": rng.normal(size=size).astype(np.float32),
        "discount": np.where(np.arange(size) % 2 == 0, DISCOUNT, 0.0).astype(np.float32),
        "next_observation": rng.normal(size=(size, 4)).astype(np.float32),
    }


def td_errors_by_hand(dqn: SimpleNamespace, learner: Any, batch: dict[str, np.ndarray]) -> Any:
    """Double Q-learning's TD errors in numpy: the online network picks the next action,
    the target network values it. Also the errors that plain Q-learning would give."""
    [online], [target] = learner.get_variables(["params"]), learner.get_variables(["target"])
    q = dqn.core.numpy_q_values
    online_layers, target_layers = dqn.core.numpy_layers(online), dqn.core.numpy_layers(target)
    rows = np.arange(len(batch["action"]))
    q_tm1 = q(online_layers, batch["observation"])[rows, batch["action"]]
    best = np.argmax(q(online_layers, batch["next_observation"]), axis=1)
    q_t_target = q(target_layers, batch["next_observation"])
    double = batch["reward"] + batch["discount"] * q_t_target[rows, best] - q_tm1
    plain = batch["reward"] + batch["discount"] * q_t_target.max(axis=1) - q_tm1
    return double, plain


def huber(x: np.ndarray) -> np.ndarray:
    return np.where(np.abs(x) <= 1.0, 0.5 * x**2, np.abs(x) - 0.5)


def trained_learner(dqn: SimpleNamespace, replay: Any = None) -> Any:
    """A learner whose online and target networks differ (a few steps, no target copy)."""
    learner = dqn.dqn.Learner(random_key=4, replay=replay, target_update_period=10_000)
    warm = batch_of(64, seed=1)
    warm["discount"][:] = 0.0
    for _ in range(20):
        learner.update(warm)
    return learner


@pytest.mark.slow
def test_the_loss_is_the_importance_weighted_huber_of_the_double_q_td_error(
    dqn: SimpleNamespace,
) -> None:
    learner = trained_learner(dqn)
    batch = batch_of(32, seed=2)
    double, plain = td_errors_by_hand(dqn, learner, batch)
    assert not np.allclose(double, plain, atol=1e-3)  # the batch tells the two apart
    probabilities = np.random.default_rng(3).uniform(0.01, 0.2, size=32).astype(np.float32)
    weights = (1.0 / probabilities) ** 0.2
    weights /= weights.max()
    expected = float(np.mean(weights * huber(double)))
    assert learner.update(batch, probabilities) == pytest.approx(expected, rel=1e-4)
    unweighted = float(np.mean(huber(double)))
    assert abs(expected - unweighted) > 1e-3 * unweighted  # the weights mattered


def table_priorities(client: Any, table: str, keys: set[int]) -> dict[int, float]:
    """The table's current priority of each of ``keys`` (read by sampling until all seen)."""
    seen: dict[int, float] = {}

    def all_seen() -> bool:
        for sample in client.sample(table, num_samples=64):
            info = sample[0].info
            seen[int(info.key)] = float(info.priority)
        return set(seen) == keys

    wait_until(all_seen, 30, what=f"samples of all {len(keys)} keys", every=0)
    return seen


@pytest.mark.slow
def test_new_priorities_reach_the_reverb_table_and_none_are_dropped(
    dqn: SimpleNamespace,
) -> None:
    reverb, core = dqn.reverb, dqn.core
    [table] = core.make_replay_tables(
        prioritized=True, priority_exponent=0.0, samples_per_insert=None, min_size_to_sample=1
    )
    server = reverb.Server([table], port=None)
    try:
        client = reverb.Client(f"localhost:{server.port}")
        batch = batch_of(32, seed=5)
        with client.trajectory_writer(num_keep_alive_refs=1) as writer:
            for i in range(32):
                writer.append({k: v[i] for k, v in batch.items()})
                writer.create_item(core.TABLE, 1.0, {k: writer.history[k][-1:] for k in batch})
        by_key: dict[int, int] = {}  # the table's key of each row of the batch
        while len(by_key) < 32:
            for sample in client.sample(core.TABLE, num_samples=64):
                step = sample[0]
                data = dict(zip(sorted(batch), step.data, strict=True))  # nest order
                [row] = np.flatnonzero(batch["reward"] == np.ravel(data["reward"])[0])
                by_key[int(step.info.key)] = int(row)
        keys = np.array(list(by_key), np.uint64)
        rows = np.array([by_key[int(k)] for k in keys])
        ordered = {k: v[rows] for k, v in batch.items()}

        learner = trained_learner(dqn, replay=client)
        updates = []
        for _ in range(50):  # faster than the sender's calls: updates pile up
            double, _ = td_errors_by_hand(dqn, learner, ordered)
            updates.append(np.abs(double))
            learner.update(ordered, np.full(32, 1 / 32, np.float32), keys)
        sender = learner._priorities
        assert sender.flush(timeout=30)
        # Every update either went out or was replaced by a later one for the same key.
        assert sender.sent_keys + sender.superseded == 50 * 32
        got = table_priorities(client, core.TABLE, {int(k) for k in keys})
        np.testing.assert_allclose([got[int(k)] for k in keys], updates[-1], rtol=1e-4, atol=1e-5)
        assert not np.allclose(updates[-1], updates[0])  # the latest ones, not the first
        sender.close()
    finally:
        server.stop()


EXAMPLE = """
name: fresh_actor
nodes:
  source:
    target: tests.agents.dqn_nodes:TaggedSource
"""


class RecordingActor:
    """Records, for each action, the version of the parameters the actor acted with and
    when (the real :class:`dqn.Actor`; only its policy lookup is observed)."""

    @staticmethod
    def make(dqn: SimpleNamespace, **kwargs: Any) -> Any:
        class Recording(dqn.dqn.Actor):  # type: ignore[misc, name-defined]
            used: list[tuple[float, int]]

            def _policy(self) -> Any:
                layers = super()._policy()
                self.used.append((time.monotonic(), int(layers[-1][1][0])))
                time.sleep(0.005)  # steps slower than an RPC: staleness is in steps
                return layers

        actor = Recording(**kwargs)
        actor.used = []
        return actor


@pytest.mark.slow
@pytest.mark.parametrize("period", [2, 10])
def test_an_actor_acts_on_parameters_no_older_than_its_update_period(
    dqn: SimpleNamespace, topo_launch: Callable, tmp_path: Path, period: int
) -> None:
    path = tmp_path / "fresh.yaml"
    path.write_text(EXAMPLE)
    # The replay is a Reverb server in this process (a reverb node would fork the test
    # process, and JAX has run in it); the parameters come over topo RPC.
    server = dqn.reverb.Server(dqn.core.make_replay_tables(samples_per_insert=None), port=None)
    run = topo_launch(path, "threads", ready_timeout=120)
    try:
        source = run.handle("source")
        actor = RecordingActor.make(
            dqn,
            random_key=0,
            replay=dqn.reverb.Client(f"localhost:{server.port}"),
            variable_source=source,
            counter=None,
            epsilon=0.0,
            update_period=period,
        )
        actor.run_loop(threading.Event(), max_steps=400)
        asked = source.asked()
    finally:
        assert run.stop(timeout=60) == 0
        server.stop()
    times = [t for t, _ in actor.used]
    ages, in_flight = [], []
    for when, version in actor.used:
        # Steps taken since this version was asked for, this one included; and how many
        # newer versions had been asked for by then.
        ages.append(sum(1 for t in times if asked[version - 1] < t <= when))
        in_flight.append(sum(1 for t in asked if t < when) - version)
    # Acme's client: a request every `period` steps, adopted on the step after it is back.
    # So the actor acts on the newest answer or the one before it (one request in flight),
    # and typically on parameters asked for at most `period` steps (plus one RPC) ago.
    # A policy held for an episode (~10 steps here: zero weights, the same action
    # always) and one episode late would be far older than that.
    assert max(in_flight) <= 1, max(in_flight)
    assert np.median(ages) <= period + 2, (np.median(ages), sorted(ages)[-10:])
    versions = [v for _, v in actor.used]
    assert versions == sorted(versions)
    assert len(set(versions)) >= 400 // (4 * period + 40)  # it kept fetching
