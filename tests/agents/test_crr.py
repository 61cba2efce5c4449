"""CRR's losses, TD targets, advantages and weights on a tiny case computed by hand."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np
import pytest

from topo.targets import prepare

ROOT = Path(__file__).resolve().parents[2]
assert prepare(str(ROOT / "examples/topologies/acme_offline.yaml"), "examples.agents") is None
learners: Any = importlib.import_module("examples.agents.offline_learners")

# Two transitions. Policy logits log(1), log(3) at s: π(s) = (1/4, 3/4).
Q = jnp.array([[2.0, 4.0], [1.0, 0.0]])
LOGITS = jnp.log(jnp.array([[1.0, 3.0], [1.0, 1.0]]))
NEXT_Q = jnp.array([[10.0, 20.0], [5.0, 7.0]])
NEXT_LOGITS = jnp.log(jnp.array([[1.0, 1.0], [3.0, 1.0]]))
BATCH = {
    "action": jnp.array([0, 0]),
    "reward": jnp.array([1.0, 1.0]),
    "discount": jnp.array([1.0, 0.0]),  # the second transition ends the episode
}


def losses(**kwargs: Any) -> dict[str, np.ndarray]:
    out = learners.crr_losses(Q, LOGITS, NEXT_Q, NEXT_LOGITS, BATCH, discount=0.9, **kwargs)
    return {k: np.asarray(v) for k, v in out.items()}


def test_td_targets_and_critic_loss_by_hand() -> None:
    out = losses()
    # 1: r + γ Σ π(a'|s') Q'(s', a') = 1 + 0.9 (0.5·10 + 0.5·20) = 14.5; 2: ends, so r = 1
    np.testing.assert_allclose(out["target"], [14.5, 1.0], rtol=1e-6)
    # Q(s, a=0) = 2 and 1: errors -12.5 and 0 -> 0.5 · mean(156.25, 0)
    np.testing.assert_allclose(out["critic_loss"], 0.5 * 156.25 / 2, rtol=1e-6)


def test_advantages_and_exp_weights_by_hand() -> None:
    out = losses(coeff="exp", beta=2.0)
    # 1: 2 - (0.25·2 + 0.75·4) = -1.5; 2: 1 - (0.5·1 + 0.5·0) = 0.5
    np.testing.assert_allclose(out["advantage"], [-1.5, 0.5], rtol=1e-6)
    weights = [math.exp(-1.5 / 2), math.exp(0.5 / 2)]
    np.testing.assert_allclose(out["weight"], weights, rtol=1e-6)
    # -mean(w · log π(a|s)) with π(0|s) = 1/4 and 1/2
    expected = -(weights[0] * math.log(0.25) + weights[1] * math.log(0.5)) / 2
    np.testing.assert_allclose(out["policy_loss"], expected, rtol=1e-6)


def test_indicator_weights_and_the_ratio_bound() -> None:
    out = losses(coeff="indicator")
    np.testing.assert_allclose(out["weight"], [0.0, 1.0])
    np.testing.assert_allclose(out["policy_loss"], -math.log(0.5) / 2, rtol=1e-6)
    bounded = losses(coeff="exp", beta=0.01)  # exp(50) is clipped to 20
    np.testing.assert_allclose(bounded["weight"][1], 20.0)
    with pytest.raises(ValueError, match="unknown CRR coefficient 'soft'"):
        losses(coeff="soft")


@pytest.mark.slow
def test_the_target_critic_is_copied_every_period() -> None:
    algorithm = learners.make_crr(hidden_sizes=(8,), target_update_period=3)
    rng = np.random.default_rng(0)
    batch = {
        "observation": rng.normal(size=(16, 4)).astype(np.float32),
        "next_observation": rng.normal(size=(16, 4)).astype(np.float32),
        "action": rng.integers(0, 2, 16).astype(np.int32),
        "reward": np.ones(16, np.float32),
        "discount": np.ones(16, np.float32),
    }
    import jax

    state = algorithm.init(jax.random.PRNGKey(0), batch)
    first = state.target_critic
    same = []
    for _ in range(3):
        state, _ = algorithm.step(state, batch)
        leaves = zip(
            jax.tree_util.tree_leaves(state.target_critic),
            jax.tree_util.tree_leaves(state.critic),
            strict=True,
        )
        same.append(all(np.array_equal(a, b) for a, b in leaves))
    assert same == [False, False, True]  # steps 1, 2 keep the initial copy; step 3 copies
    untouched = jax.tree_util.tree_leaves(first)
    assert not all(
        np.array_equal(a, b)
        for a, b in zip(untouched, jax.tree_util.tree_leaves(state.critic), strict=True)
    )
