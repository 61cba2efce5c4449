"""DIAL's parts: the discretise/regularise unit, gradients through messages, a trainer
step on a fixed batch, and the executing policy."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from examples.agents.dial import (
    Config,
    Episode,
    dru,
    loss_fn,
    make_core,
    make_learning,
    play_episode,
)
from examples.agents.switch import SwitchGame


def test_dru_executing_is_a_hard_bit() -> None:
    m = jnp.array([-3.0, -0.1, 0.0, 0.2, 5.0])
    assert dru(m, None, 2.0, training=False).tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]


def test_dru_training_is_a_noisy_sigmoid_with_a_gradient() -> None:
    m = jnp.full((20_000,), 0.5)
    noisy = dru(m, jax.random.PRNGKey(0), 2.0, training=True)
    assert float(noisy.min()) > 0.0 and float(noisy.max()) < 1.0
    # sigmoid(0.5 + N(0, 4)) spreads over (0, 1); the noise pulls its mean towards 0.5
    assert 0.5 < float(noisy.mean()) < float(jax.nn.sigmoid(0.5))
    assert float(jnp.std(noisy)) > 0.25  # the noise pushes messages towards 0 and 1
    clean = dru(jnp.array(0.5), None, 2.0, training=True)
    assert abs(float(clean) - float(jax.nn.sigmoid(0.5))) < 1e-6
    grad = jax.grad(lambda x: dru(x, jax.random.PRNGKey(1), 2.0, training=True))(0.3)
    assert float(grad) > 0.0


def _fixed_batch(cfg: Config, episodes: int = 16, seed: int = 0) -> Episode:
    game = SwitchGame(cfg.num_agents, seed=seed)
    rng = np.random.default_rng(seed)
    learning = make_learning(cfg)
    params = learning.init(jax.random.PRNGKey(seed)).params
    rows = [play_episode(learning, params, game, 1.0, rng)[0] for _ in range(episodes)]
    return Episode(
        *(
            jnp.asarray(np.stack([r[k] for r in rows]))
            for k in ("in_room", "actions", "rewards", "mask")
        )
    )


def test_the_td_error_reaches_the_sender_through_the_message() -> None:
    cfg = Config(num_agents=3)
    core = make_core(cfg)
    learning = make_learning(cfg)
    state = learning.init(jax.random.PRNGKey(0))
    batch = _fixed_batch(cfg)
    key = jax.random.PRNGKey(3)
    grads = jax.grad(lambda p: loss_fn(cfg, core, p, state.target_params, batch, key))(state.params)
    # The message head only affects the loss through what later prisoners see.
    message_grad = grads["message"]["w"]
    assert float(jnp.abs(message_grad).sum()) > 0.0


def test_a_trainer_step_on_a_fixed_batch_lowers_the_loss() -> None:
    cfg = Config(num_agents=3, target_period=1000)
    core = make_core(cfg)
    learning = make_learning(cfg)
    state = learning.init(jax.random.PRNGKey(0))
    batch = _fixed_batch(cfg)
    key = jax.random.PRNGKey(7)
    before = float(loss_fn(cfg, core, state.params, state.target_params, batch, key))
    first = state.params
    for _ in range(50):
        state, _ = learning.update(state, batch, key)
    after = float(loss_fn(cfg, core, state.params, state.target_params, batch, key))
    assert after < 0.5 * before
    assert int(state.steps) == 50
    changed = jax.tree_util.tree_map(lambda a, b: bool(jnp.any(a != b)), first, state.params)
    assert all(jax.tree_util.tree_leaves(changed))
    # The target network has not been copied yet (period 1000) ...
    same = jax.tree_util.tree_map(lambda a, b: bool(jnp.all(a == b)), first, state.target_params)
    assert all(jax.tree_util.tree_leaves(same))


def test_the_target_network_is_copied_at_its_period() -> None:
    cfg = Config(num_agents=3, target_period=5)
    learning = make_learning(cfg)
    state = learning.init(jax.random.PRNGKey(0))
    batch = _fixed_batch(cfg, episodes=4)
    key = jax.random.PRNGKey(1)
    for _ in range(5):
        state, _ = learning.update(state, batch, key)
    same = jax.tree_util.tree_map(
        lambda a, b: bool(jnp.all(a == b)), state.params, state.target_params
    )
    assert all(jax.tree_util.tree_leaves(same))


def test_a_played_episode_is_padded_and_uses_the_bulb() -> None:
    cfg = Config(num_agents=3)
    learning = make_learning(cfg)
    params = learning.init(jax.random.PRNGKey(0)).params
    game = SwitchGame(3, seed=4)
    episode, total, _ = play_episode(learning, params, game, 0.0, np.random.default_rng(0))
    days = int(episode["mask"].sum())
    assert 1 <= days <= cfg.limit and episode["in_room"].shape == (cfg.limit, 3)
    assert episode["in_room"][:days].sum(axis=1).tolist() == [1.0] * days
    assert episode["in_room"][days:].sum() == 0.0
    assert total == float(episode["rewards"].sum())
    assert episode["in_room"][:days].argmax(axis=1).tolist() == game.interrogated
