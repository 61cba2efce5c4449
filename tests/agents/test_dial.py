"""DIAL's parts: the discretise/regularise unit, the trainer's unroll (it replays the
executors' soft messages and passes gradient through them), a trainer step on a fixed
batch, and the executing policy."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from examples.agents.dial import (
    FIELDS,
    NUM_ACTIONS,
    Config,
    Episode,
    dru,
    loss_fn,
    make_core,
    make_learning,
    play_batch,
    play_episode,
    unroll,
)
from examples.agents.switch import SwitchGame


def test_dru_executing_is_a_hard_bit() -> None:
    m = jnp.array([-3.0, -0.1, 0.0, 0.2, 5.0])
    assert dru(m, None, 2.0, training=False).tolist() == [0.0, 0.0, 0.0, 1.0, 1.0]


@pytest.mark.slow
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


def _fixed_batch(cfg: Config, episodes: int = 16, seed: int = 0) -> tuple[Episode, Any]:
    """Episodes played in training mode (soft, noisy messages) and the parameters that
    played them."""
    games = [SwitchGame(cfg.num_agents, seed=seed + i) for i in range(episodes)]
    learning = make_learning(cfg)
    params = learning.init(jax.random.PRNGKey(seed)).params
    data, _ = play_batch(learning, params, games, 0.5, np.random.default_rng(seed))
    return Episode(*(jnp.asarray(data[f]) for f in FIELDS)), params


@pytest.mark.slow
def test_the_trainer_unroll_replays_the_executor_messages() -> None:
    cfg = Config(num_agents=3)
    batch, params = _fixed_batch(cfg)
    _, sent = unroll(cfg, make_core(cfg), params, batch)
    days = batch.mask > 0
    # The same parameters and the recorded noise give the same soft messages ...
    assert np.allclose(np.asarray(sent)[days], np.asarray(batch.messages)[days], atol=1e-5)
    # ... which are soft while training (not bits), spread by the DRU's noise.
    soft = np.asarray(batch.messages)[days]
    assert ((soft > 0.01) & (soft < 0.99)).any() and soft.std() > 0.1


@pytest.mark.slow
def test_the_td_error_reaches_the_sender_through_the_message() -> None:
    cfg = Config(num_agents=3)
    core = make_core(cfg)
    batch, params = _fixed_batch(cfg)
    grads = jax.grad(lambda p: loss_fn(cfg, core, p, params, batch))(params)
    # The message logit (the last output) only changes the loss through what the next
    # prisoner in the room receives: its gradient is the one that crossed the channel.
    through_channel = grads["out"]["w"][:, NUM_ACTIONS]
    assert float(jnp.abs(through_channel).sum()) > 1e-6
    assert float(jnp.abs(grads["out"]["b"][NUM_ACTIONS])) > 1e-8
    # The receiving side of the channel gets a gradient too.
    assert float(jnp.abs(grads["message_in"]["w"]).sum()) > 1e-6
    # With the noise so large that the message is a coin toss, nothing crosses.
    loud = batch._replace(noise=batch.noise * 1e6)
    grads = jax.grad(lambda p: loss_fn(cfg, core, p, params, loud))(params)
    assert float(jnp.abs(grads["out"]["w"][:, NUM_ACTIONS]).sum()) < 1e-6


@pytest.mark.slow
def test_a_trainer_step_on_a_fixed_batch_lowers_the_loss() -> None:
    cfg = Config(num_agents=3, target_period=1000)
    core = make_core(cfg)
    learning = make_learning(cfg)
    state = learning.init(jax.random.PRNGKey(0))
    batch, _ = _fixed_batch(cfg)
    before = float(loss_fn(cfg, core, state.params, state.target_params, batch))
    first = state.params
    for _ in range(50):
        state, _ = learning.update(state, batch)
    after = float(loss_fn(cfg, core, state.params, state.target_params, batch))
    assert after < 0.5 * before
    assert int(state.steps) == 50
    changed = jax.tree_util.tree_map(lambda a, b: bool(jnp.any(a != b)), first, state.params)
    assert all(jax.tree_util.tree_leaves(changed))
    # The target network has not been copied yet (period 1000) ...
    same = jax.tree_util.tree_map(lambda a, b: bool(jnp.all(a == b)), first, state.target_params)
    assert all(jax.tree_util.tree_leaves(same))


@pytest.mark.slow
def test_the_target_network_is_copied_at_its_period() -> None:
    cfg = Config(num_agents=3, target_period=5)
    learning = make_learning(cfg)
    state = learning.init(jax.random.PRNGKey(0))
    batch, _ = _fixed_batch(cfg, episodes=4)
    for _ in range(5):
        state, _ = learning.update(state, batch)
    same = jax.tree_util.tree_map(
        lambda a, b: bool(jnp.all(a == b)), state.params, state.target_params
    )
    assert all(jax.tree_util.tree_leaves(same))


@pytest.mark.slow
def test_a_played_episode_is_padded_and_uses_the_bulb() -> None:
    cfg = Config(num_agents=3)
    learning = make_learning(cfg)
    params = learning.init(jax.random.PRNGKey(0)).params
    game = SwitchGame(3, seed=4)
    episode, total = play_episode(
        learning, params, game, 0.0, np.random.default_rng(0), training=False
    )
    days = int(episode["mask"].sum())
    assert 1 <= days <= cfg.limit and episode["in_room"].shape == (cfg.limit, 3)
    assert episode["in_room"][:days].sum(axis=1).tolist() == [1.0] * days
    assert episode["in_room"][days:].sum() == 0.0
    assert total == float(episode["rewards"].sum())
    assert episode["in_room"][:days].argmax(axis=1).tolist() == game.interrogated
    # Executing, messages are bits and no noise is drawn.
    assert set(episode["messages"][:days].tolist()) <= {0.0, 1.0}
    assert not episode["noise"].any()


@pytest.mark.slow
def test_last_action_is_an_input() -> None:
    cfg = Config(num_agents=3)
    learning = make_learning(cfg)
    params = learning.init(jax.random.PRNGKey(0)).params
    state = learning.initial_state(9)  # 3 episodes x 3 prisoners
    in_room = np.zeros((3, 3), np.float32)
    in_room[:, 0] = 1.0
    last = np.array([[0, 2, 2], [1, 2, 2], [2, 2, 2]], np.int32)
    q, _, _ = learning.act(params, in_room, np.zeros(3), last, state, np.zeros(3), False)
    q = np.asarray(q)[:, 0]
    assert not np.allclose(q[0], q[1]) and not np.allclose(q[0], q[2])
