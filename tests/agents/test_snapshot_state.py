"""The example agents' nodes save and restore their learning state (issue 29): a node
built afresh and restored makes the next update (or draws the next random numbers) the
saved one makes next, and its counts continue. Real learners, actors and Reverb; states
go through pickle, as they travel to the launcher."""

from __future__ import annotations

import importlib
import importlib.util
import pickle
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from topo.targets import prepare

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def agents() -> SimpleNamespace:
    """The agents' modules, imported here and not at collection (see test_dqn_learner)."""
    assert prepare(str(ROOT / "examples/topologies/acme_offline.yaml"), "examples.agents") is None
    names = ["dqn", "dqn_core", "offline", "demonstrations", "mava", "dial", "producers"]
    return SimpleNamespace(**{n: importlib.import_module(f"examples.agents.{n}") for n in names})


def through_pickle(state: Any) -> Any:
    return pickle.loads(pickle.dumps(state))


def leaves(tree: Any) -> list[np.ndarray]:
    import jax

    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def assert_same(a: Any, b: Any) -> None:
    for x, y in zip(leaves(a), leaves(b), strict=True):
        assert np.array_equal(x, y)


def dqn_batch(seed: int, size: int = 32) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "observation": rng.normal(size=(size, 4)).astype(np.float32),
        "action": rng.integers(0, 2, size=size).astype(np.int32),
        "reward": rng.normal(size=size).astype(np.float32),
        "discount": np.full(size, 0.97, np.float32),
        "next_observation": rng.normal(size=(size, 4)).astype(np.float32),
    }


def test_a_restored_dqn_learner_makes_the_next_update_of_the_saved_one(
    agents: SimpleNamespace,
) -> None:
    learner = agents.dqn.Learner(random_key=3, target_update_period=4)
    for i in range(6):
        learner.update(dqn_batch(i))
    saved = through_pickle(learner.save())
    # numpy only: a state loads where no JAX device is
    assert all(type(v) is np.ndarray for v in saved["state"])
    fresh = agents.dqn.Learner(random_key=77, target_update_period=4)
    fresh.restore(saved)
    assert fresh.steps == learner.steps == 6
    for i in range(6, 9):  # through a target copy at step 8: the step count came back too
        assert fresh.update(dqn_batch(i)) == learner.update(dqn_batch(i))
    assert_same(
        fresh.get_variables(["policy", "target"]), learner.get_variables(["params", "target"])
    )
    assert fresh.steps == 9 and fresh.save()["steps"] == 9


def test_a_dqn_learner_refuses_the_state_of_another_network(agents: SimpleNamespace) -> None:
    state = agents.dqn.Learner(random_key=0, hidden_sizes=(32, 32)).save()
    with pytest.raises(
        ValueError, match=r"another DQN learner.*float32\[32\] where .* float32\[64\]"
    ):
        agents.dqn.Learner(random_key=0).restore(state)


@pytest.mark.parametrize("algorithm", ["bc", "crr"])
def test_a_restored_offline_learner_draws_the_next_batch_and_makes_the_same_step(
    agents: SimpleNamespace, algorithm: str
) -> None:
    data = agents.demonstrations.record_episodes(episodes=4, seed=1)

    def learner(seed: int) -> Any:
        factory = agents.demonstrations.batches  # its position is part of the state
        return agents.offline.Learner(
            [0, seed], dataset=lambda key: factory(data, 64, seed), algorithm=algorithm
        )

    trained = learner(0)
    trained.run(num_steps=7)
    fresh = learner(5)
    fresh.restore(through_pickle(trained.save()))
    assert fresh.steps == 7
    for _ in range(3):
        trained.step()
        fresh.step()
    assert fresh.steps == trained.steps == 10
    assert_same(fresh.get_variables(["policy"]), trained.get_variables(["policy"]))
    assert_same(fresh.save()["state"], trained.save()["state"])


@pytest.mark.slow
def test_a_restored_dial_trainer_makes_the_next_update_of_the_saved_one(
    agents: SimpleNamespace,
) -> None:
    import jax.numpy as jnp

    dial, mava = agents.dial, agents.mava
    trainer = mava.Trainer(replay=None, num_agents=3, seed=0, target_period=2)
    executor = mava.Executor(0, replay=None, variable_source=trainer, episodes_per_round=8)
    executor._variables.update(wait=True)
    learning = dial.make_learning(dial.Config(num_agents=3))

    def batch() -> Any:
        data, _ = executor.play_round(learning)
        return dial.Episode(*(jnp.asarray(data[f]) for f in dial.FIELDS))

    for _ in range(3):
        trainer.update(batch())
    fresh = mava.Trainer(replay=None, num_agents=3, seed=9, target_period=2)
    fresh.restore(through_pickle(trainer.save()))
    assert fresh.steps == trainer.steps == 3
    nxt = batch()
    assert fresh.update(nxt) == trainer.update(nxt)
    assert_same(fresh.get_variables(["policy"]), trainer.get_variables(["policy"]))
    assert_same(fresh.save()["state"], trainer.save()["state"])  # target and optimiser too


@pytest.mark.slow
def test_a_restored_dial_executor_plays_the_episodes_the_saved_one_plays_next(
    agents: SimpleNamespace,
) -> None:
    dial, mava = agents.dial, agents.mava
    trainer = mava.Trainer(replay=None, num_agents=3, seed=0)
    learning = dial.make_learning(dial.Config(num_agents=3))

    def executor() -> Any:
        made = mava.Executor(1, replay=None, variable_source=trainer, episodes_per_round=4)
        made._variables.update(wait=True)
        return made

    first = executor()
    opening, _ = first.play_round(learning)
    first.steps, first.episodes = 40, 4  # as counted after the round's inserts
    saved = through_pickle(first.save())
    restored = executor()
    restored.restore(saved)
    assert (restored.steps, restored.episodes) == (40, 4)
    mine, _ = restored.play_round(learning)
    theirs, _ = first.play_round(learning)
    for field in dial.FIELDS:  # who was interrogated, the exploration and the DRU noise
        assert np.array_equal(mine[field], theirs[field]), field
    assert not np.array_equal(mine["noise"], opening["noise"])  # on, not again


class LocalSource:
    """Parameters for an actor, from this process (a learner's answer)."""

    def __init__(self, params: Any) -> None:
        self.params = params

    def get_variables(self, names: list[str]) -> list[Any]:
        return [self.params for _ in names]


@pytest.fixture
def replay(agents: SimpleNamespace) -> Any:
    """A real Reverb server in this process that never holds inserts; its client."""
    import reverb

    server = reverb.Server(agents.dqn_core.make_replay_tables(samples_per_insert=None), port=None)
    yield reverb.Client(f"localhost:{server.port}")
    server.stop()


def test_a_restored_dqn_actor_continues_its_random_streams_and_counts(
    agents: SimpleNamespace, replay: Any
) -> None:
    from topo.nodes import Counter

    source = LocalSource(agents.dqn.Learner(random_key=0).get_variables(["policy"])[0])
    counter = Counter()

    def actor() -> Any:
        return agents.dqn.Actor(5, replay, source, counter, actor_id=0, epsilon=0.5)

    first = actor()
    first_draws = actor()._rng.random(4)  # a fresh actor's opening draws
    first.run_loop(threading.Event(), max_steps=300)
    first._counts.flush()
    saved = through_pickle(first.save())
    assert saved["steps"] == first.steps >= 300
    assert counter.get_counts() == {"actor_steps": first.steps, "actor_episodes": first.episodes}
    restored = actor()
    restored.restore(saved)
    assert (restored.steps, restored.episodes) == (first.steps, first.episodes)
    start, _ = restored._env.reset()
    expected, _ = first._env.reset()
    assert np.array_equal(start, expected)  # the next episode starts where it would have
    draws = restored._rng.random(4)
    assert np.array_equal(draws, first._rng.random(4))
    assert not np.array_equal(draws, first_draws)  # on from the saved point, not again
    restored.run_loop(threading.Event(), max_steps=saved["steps"] + 50)
    assert restored.steps >= saved["steps"] + 50  # its counts continue


def test_a_restored_dqn_evaluator_plays_the_next_seeds(agents: SimpleNamespace) -> None:
    params = agents.dqn.Learner(random_key=1).get_variables(["policy"])[0]
    first = agents.dqn.Evaluator(0, None, None, episodes=2)
    first.returns = [first.evaluate(params), first.evaluate(params)]
    restored = agents.dqn.Evaluator(0, None, None, episodes=2)
    restored.restore(through_pickle(first.save()))
    assert restored.returns == first.returns
    assert restored.evaluate(params) == first.evaluate(params)


def test_a_restored_consumer_asks_only_for_the_missing_results(agents: SimpleNamespace) -> None:
    from concurrent.futures import Future

    from topo.runtime.context import NodeInfo, ProgramContext, node_scope

    class Direct:  # a producer answering in this thread, through the futures interface
        def __init__(self, producer: Any) -> None:
            self.futures, self.producer = self, producer

        def work(self, context: int) -> Future[int]:
            future: Future[int] = Future()
            future.set_result(self.producer.work(context))
            return future

    producers = [agents.producers.Producer(i, rounds=10) for i in range(2)]
    expected = {i: producers[i % 2].work(i) for i in range(6)}
    consumer = agents.producers.Consumer([Direct(p) for p in producers], work_items=6)
    consumer.restore(through_pickle({"results": {i: expected[i] for i in range(4)}}))
    before = [p.done for p in producers]
    with node_scope(ProgramContext.local(), NodeInfo("consumer", "consumer")):
        consumer.run()
    assert [p.done - b for p, b in zip(producers, before, strict=True)] == [1, 1]  # items 4, 5
    assert consumer.result == sum(expected.values())
    assert consumer.save() == {"results": expected}
