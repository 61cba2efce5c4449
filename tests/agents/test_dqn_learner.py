"""The DQN agent's parts without a running program: the learner step on a fixed batch,
get_variables/save/restore, n-step transitions, the numpy policy, Ape-X epsilons."""

from __future__ import annotations

import importlib.util
import pickle
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

# The agent's modules are imported by the fixture, not at collection: hypothesis's pytest
# plugin scans sys.modules while collecting, and haiku's lazy flax module raises there.
pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)


@pytest.fixture(scope="module")
def dqn() -> SimpleNamespace:
    """The agent's pieces (see the note on imports above)."""
    import jax

    from examples.agents import dqn, dqn_core

    names = ["NStep", "apex_epsilon", "init_params", "make_network", "numpy_layers"]
    return SimpleNamespace(
        jax=jax,
        Learner=dqn.Learner,
        numpy_q_values=dqn_core.numpy_q_values,
        **{n: getattr(dqn_core, n) for n in names},
    )


def fixed_batch(size: int = 32, seed: int = 0) -> dict[str, np.ndarray]:
    """Transitions whose targets are easy to fit: reward 1, terminal (no bootstrap)."""
    rng = np.random.default_rng(seed)
    return {
        "observation": rng.normal(size=(size, 4)).astype(np.float32),
        "action": rng.integers(0, 2, size=size).astype(np.int32),
        "reward": np.ones(size, np.float32),
        "discount": np.zeros(size, np.float32),
        "next_observation": rng.normal(size=(size, 4)).astype(np.float32),
    }


def leaves(tree: Any) -> list[np.ndarray]:
    import jax

    return [np.asarray(x) for x in jax.tree_util.tree_leaves(tree)]


def same(a: Any, b: Any) -> bool:
    return all(np.array_equal(x, y) for x, y in zip(leaves(a), leaves(b), strict=True))


@pytest.mark.slow
def test_learner_steps_lower_the_loss_on_a_fixed_batch_and_move_the_params(
    dqn: SimpleNamespace,
) -> None:
    learner = dqn.Learner(random_key=[0, 3], learning_rate=1e-2)
    batch = fixed_batch()
    [before] = learner.get_variables(["policy"])
    losses = [learner.update(batch) for _ in range(60)]
    [after] = learner.get_variables(["params"])
    assert losses[-1] < 0.1 * losses[0]
    assert not same(before, after)
    assert learner.steps == 60


def test_the_target_network_is_copied_at_its_period_only(dqn: SimpleNamespace) -> None:
    learner = dqn.Learner(random_key=1, target_update_period=5)
    batch = fixed_batch()
    [start] = learner.get_variables(["target"])
    for _ in range(4):
        learner.update(batch)
    [target], [online] = learner.get_variables(["target"]), learner.get_variables(["policy"])
    assert same(target, start) and not same(online, start)  # not yet: 4 < 5
    learner.update(batch)
    [target], [online] = learner.get_variables(["target"]), learner.get_variables(["policy"])
    assert same(target, online)  # step 5: copied
    learner.update(batch)
    [target6], [online6] = learner.get_variables(["target"]), learner.get_variables(["policy"])
    assert same(target6, online) and not same(target6, online6)  # held until step 10


def test_save_restore_round_trip_continues_the_same_training(dqn: SimpleNamespace) -> None:
    batch = fixed_batch()
    first = dqn.Learner(random_key=2)
    for _ in range(7):
        first.update(batch)
    saved = pickle.loads(pickle.dumps(first.save()))  # as it travels over RPC
    second = dqn.Learner(random_key=99)
    assert not same(second.get_variables(["policy"]), first.get_variables(["policy"]))
    second.restore(saved)
    assert second.steps == 7
    assert same(
        second.get_variables(["policy", "target"]), first.get_variables(["policy", "target"])
    )
    assert second.update(batch) == pytest.approx(first.update(batch), rel=1e-6)  # adam state too
    assert same(second.get_variables(["policy"]), first.get_variables(["policy"]))


def test_get_variables_refuses_unknown_names(dqn: SimpleNamespace) -> None:
    with pytest.raises(KeyError, match="unknown variable 'weights'"):
        dqn.Learner(random_key=0).get_variables(["weights"])


def test_numpy_policy_matches_the_haiku_network(dqn: SimpleNamespace) -> None:
    network = dqn.make_network((16, 8))
    params = dqn.init_params(network, 5)
    obs = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)
    expected = np.asarray(network.apply(params, obs))
    np.testing.assert_allclose(
        dqn.numpy_q_values(dqn.numpy_layers(dqn.jax.device_get(params)), obs),
        expected,
        rtol=1e-5,
        atol=1e-6,
    )


def obs(i: float) -> np.ndarray:
    return np.full(4, i, np.float32)


def test_n_step_transitions_sum_rewards_and_stop_bootstrapping_at_termination(
    dqn: SimpleNamespace,
) -> None:
    nstep = dqn.NStep(n=3, discount=0.5)
    assert nstep.add(obs(0), 0, 1.0, obs(1), False, False) == []
    assert nstep.add(obs(1), 1, 2.0, obs(2), False, False) == []
    [t] = nstep.add(obs(2), 0, 4.0, obs(3), False, False)
    assert t["reward"] == pytest.approx(1 + 0.5 * 2 + 0.25 * 4)
    assert t["discount"] == pytest.approx(0.125) and t["next_observation"][0] == 3
    assert t["observation"][0] == 0 and t["action"] == 0
    out = nstep.add(obs(3), 1, 8.0, obs(4), True, False)  # terminal: flush, no bootstrap
    assert [x["observation"][0] for x in out] == [1, 2, 3]
    assert [float(x["reward"]) for x in out] == pytest.approx([2 + 2 + 2, 4 + 4, 8])
    assert all(x["discount"] == 0.0 for x in out)


def test_a_truncated_episode_still_bootstraps(dqn: SimpleNamespace) -> None:
    nstep = dqn.NStep(n=3, discount=0.5)
    nstep.add(obs(0), 0, 1.0, obs(1), False, False)
    out = nstep.add(obs(1), 0, 1.0, obs(2), False, True)
    assert [float(x["discount"]) for x in out] == [0.25, 0.5]
    assert all(x["next_observation"][0] == 2 for x in out)


def test_apex_epsilons_fall_from_base_to_base_to_the_1_plus_alpha(dqn: SimpleNamespace) -> None:
    eps = [dqn.apex_epsilon(i, 8) for i in range(8)]
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4**8)
    assert eps == sorted(eps, reverse=True)
    assert 0.4**8 < dqn.apex_epsilon(0, 1) < 0.4
