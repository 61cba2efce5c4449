"""DIAL (Foerster et al., 2016) for the switch riddle, on jax + dm-haiku + optax.

Every prisoner runs the same recurrent network (a GRU; parameters shared, the agent's
id is an input). Each day it outputs Q-values for the environment actions (NONE/TELL)
and a message logit. The message of the prisoner in the room becomes the bulb the
next prisoner in the room sees. While training the message goes through the
discretise/regularise unit as ``sigmoid(m + noise)``, so the recipient's TD error
flows back through it into the sender, across agents and days; while executing the
unit is a hard threshold ``m > 0``, which is the environment's bulb.

Only the prisoner in the room acts and speaks, so the loss is the TD error of the
prisoner in the room on each day, bootstrapped (undiscounted, as in the paper) from
the target network's value for the next day's prisoner in the room.

Nothing here runs JAX at import time (the procs backend forks after importing it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax

NUM_ACTIONS = 2  # NONE, TELL


@dataclass(frozen=True)
class Config:
    """DIAL's hyper-parameters (the paper's values where they fit a CPU)."""

    num_agents: int = 3
    hidden: int = 64
    sigma: float = 2.0  # the DRU's noise while training (the paper uses 2)
    learning_rate: float = 5e-4
    gamma: float = 1.0
    target_period: int = 100  # learner steps between target-network copies
    max_grad_norm: float = 10.0

    @property
    def limit(self) -> int:
        """Days per episode, ``4n - 6``."""
        return max(1, 4 * self.num_agents - 6)


def dru(message: jax.Array, key: jax.Array | None, sigma: float, training: bool) -> jax.Array:
    """The discretise/regularise unit: ``sigmoid(m + N(0, sigma))`` while training
    (differentiable), ``1[m > 0]`` while executing (a bit)."""
    if training:
        noise = 0.0 if key is None else sigma * jax.random.normal(key, message.shape)
        return jax.nn.sigmoid(message + noise)
    return (message > 0).astype(message.dtype)


class Episode(NamedTuple):
    """A batch of whole episodes, padded to the episode length ``T``."""

    in_room: jax.Array  # (B, T, n) one-hot of the prisoner in the room
    actions: jax.Array  # (B, T) int, the action of the prisoner in the room
    rewards: jax.Array  # (B, T)
    mask: jax.Array  # (B, T) 1.0 on days that happened


def _inputs(cfg: Config, in_room: jax.Array, bulb: jax.Array, day: int) -> jax.Array:
    """Per-agent inputs (B, n, features): in-room flag, the bulb (seen in the room only),
    the agent's id and the day."""
    batch = in_room.shape[0]
    ids = jnp.broadcast_to(jnp.eye(cfg.num_agents), (batch, cfg.num_agents, cfg.num_agents))
    days = jnp.zeros((batch, cfg.num_agents, cfg.limit)).at[:, :, day].set(1.0)
    seen = in_room * bulb[:, None]
    return jnp.concatenate([in_room[..., None], seen[..., None], ids, days], axis=-1)


def make_core(cfg: Config) -> hk.Transformed:
    """The per-day step ``(inputs (B*n, F), state) -> (q (B*n, 2), message (B*n,), state)``
    and its initial state, as one haiku transform with methods."""

    def step(x: jax.Array, state: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
        embed = jax.nn.relu(hk.Linear(cfg.hidden, name="embed")(x))
        out, state = hk.GRU(cfg.hidden, name="gru")(embed, state)
        head = jax.nn.relu(hk.Linear(cfg.hidden, name="head")(out))
        q = hk.Linear(NUM_ACTIONS, name="q")(head)
        message = hk.Linear(1, name="message")(head)[..., 0]
        return q, message, state

    def initial_state(batch: int) -> jax.Array:
        return jnp.zeros((batch, cfg.hidden))

    def init(x: jax.Array, state: jax.Array) -> Any:
        return step(x, state)

    return hk.without_apply_rng(hk.multi_transform(lambda: (init, (step, initial_state))))


def unroll(
    cfg: Config,
    core: hk.MultiTransformed,
    params: Any,
    in_room: jax.Array,
    key: jax.Array | None,
    training: bool,
) -> tuple[jax.Array, jax.Array]:
    """Run all prisoners through the episodes ``in_room`` (B, T, n): the Q-values of the
    prisoner in the room on each day (B, T, 2) and the bulbs they saw (B, T)."""
    step, initial_state = core.apply
    batch, days, n = in_room.shape
    state = initial_state(params, batch * n)
    bulb = jnp.zeros((batch,))
    qs, bulbs = [], []
    for day in range(days):
        x = _inputs(cfg, in_room[:, day], bulb, day).reshape(batch * n, -1)
        q, message, state = step(params, x, state)
        q = q.reshape(batch, n, NUM_ACTIONS)
        message = message.reshape(batch, n)
        qs.append(jnp.einsum("bn,bna->ba", in_room[:, day], q))
        bulbs.append(bulb)
        spoken = jnp.sum(in_room[:, day] * message, axis=1)
        day_key = None if key is None else jax.random.fold_in(key, day)
        bulb = dru(spoken, day_key, cfg.sigma, training)
    return jnp.stack(qs, axis=1), jnp.stack(bulbs, axis=1)


def loss_fn(
    cfg: Config,
    core: hk.MultiTransformed,
    params: Any,
    target_params: Any,
    batch: Episode,
    key: jax.Array,
) -> jax.Array:
    """Mean squared TD error of the prisoner in the room over the days that happened."""
    q, _ = unroll(cfg, core, params, batch.in_room, key, training=True)
    q_target, _ = unroll(cfg, core, target_params, batch.in_room, key, training=True)
    taken = jnp.take_along_axis(q, batch.actions[..., None], axis=-1)[..., 0]
    next_value = jnp.max(q_target, axis=-1)[:, 1:]
    next_mask = batch.mask[:, 1:]
    bootstrap = jnp.concatenate([next_value * next_mask, jnp.zeros_like(next_value[:, :1])], axis=1)
    target = batch.rewards + cfg.gamma * jax.lax.stop_gradient(bootstrap)
    error = (taken - target) * batch.mask
    return jnp.sum(error**2) / jnp.maximum(jnp.sum(batch.mask), 1.0)


class TrainState(NamedTuple):
    """Everything the learner updates."""

    params: Any
    target_params: Any
    opt_state: Any
    steps: jax.Array


class Learning(NamedTuple):
    """The jitted functions of one DIAL configuration."""

    init: Callable[[jax.Array], TrainState]
    update: Callable[[TrainState, Episode, jax.Array], tuple[TrainState, jax.Array]]
    # act(params, in_room (n,), bulb, hidden (n, H), day) -> (Q (n, 2), bulb left, hidden):
    # one day of one episode while executing, messages as hard bits.
    act: Callable[..., tuple[jax.Array, jax.Array, jax.Array]]
    initial_state: Callable[[Any, int], jax.Array]


def make_learning(cfg: Config) -> Learning:
    """Build (and jit) init, update and act for ``cfg``."""
    core = make_core(cfg)
    optimiser = optax.chain(
        optax.clip_by_global_norm(cfg.max_grad_norm), optax.adam(cfg.learning_rate)
    )
    features = 2 + cfg.num_agents + cfg.limit

    def init(key: jax.Array) -> TrainState:
        params = core.init(key, jnp.zeros((1, features)), jnp.zeros((1, cfg.hidden)))
        return TrainState(params, params, optimiser.init(params), jnp.zeros((), jnp.int32))

    def update(state: TrainState, batch: Episode, key: jax.Array) -> tuple[TrainState, jax.Array]:
        loss, grads = jax.value_and_grad(
            lambda p: loss_fn(cfg, core, p, state.target_params, batch, key)
        )(state.params)
        updates, opt_state = optimiser.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        steps = state.steps + 1
        target = optax.periodic_update(params, state.target_params, steps, cfg.target_period)
        return TrainState(params, target, opt_state, steps), loss

    step, initial_state = core.apply

    def act_day(
        params: Any, in_room: jax.Array, bulb: jax.Array, hidden: jax.Array, day: jax.Array
    ) -> tuple[jax.Array, jax.Array, jax.Array]:
        """One executing day: the same network and inputs as ``unroll`` for one episode."""
        days = jax.nn.one_hot(day, cfg.limit)
        n = cfg.num_agents
        x = jnp.concatenate(
            [
                in_room[:, None],
                (in_room * bulb)[:, None],
                jnp.eye(n),
                jnp.broadcast_to(days, (n, cfg.limit)),
            ],
            axis=-1,
        )
        q, message, hidden = step(params, x, hidden)
        spoken = jnp.sum(in_room * message)
        return q, dru(spoken, None, cfg.sigma, training=False), hidden

    return Learning(
        init=jax.jit(init),
        update=jax.jit(update),
        act=jax.jit(act_day),
        initial_state=lambda params, batch: initial_state(params, batch),
    )


def play_episode(
    learning: Learning,
    params: Any,
    game: Any,
    epsilon: float,
    rng: np.random.Generator,
    communicate: bool = True,
) -> tuple[dict[str, np.ndarray], float, bool]:
    """Play one switch-riddle episode with the ε-greedy policy of ``params`` (messages as
    hard bits; ``communicate=False`` keeps the bulb off). Returns the padded episode
    (in_room, actions, rewards, mask), its return and whether everyone was interrogated."""
    n, limit = game.num_agents, game.limit
    episode = {
        "in_room": np.zeros((limit, n), np.float32),
        "actions": np.zeros((limit,), np.int32),
        "rewards": np.zeros((limit,), np.float32),
        "mask": np.zeros((limit,), np.float32),
    }
    obs = game.reset()
    hidden = learning.initial_state(params, n)
    bulb = jnp.zeros(())
    total, everyone = 0.0, False
    for day in range(limit):
        q, spoken, hidden = learning.act(params, jnp.asarray(obs.in_room), bulb, hidden, day)
        who = obs.interrogated
        if rng.random() < epsilon:
            action = int(rng.integers(NUM_ACTIONS))
        else:
            action = int(np.argmax(np.asarray(q[who])))
        bulb = spoken if communicate else jnp.zeros(())
        actions = [0] * n
        actions[who] = action
        step = game.step(actions, bulb=float(bulb))
        episode["in_room"][day] = obs.in_room
        episode["actions"][day] = action
        episode["rewards"][day] = step.reward
        episode["mask"][day] = 1.0
        total += step.reward
        everyone = step.all_interrogated
        obs = step.observation
        if step.done:
            break
    return episode, total, everyone
