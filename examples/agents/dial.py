"""DIAL (Foerster et al., 2016) for the switch riddle, on jax + dm-haiku + optax.

Every prisoner runs the same recurrent network (parameters shared). As in the paper its
input is the sum of four embeddings: the agent's index, its observation (in the room or
not), the message it receives (the bulb, seen in the room only) and its last action;
then a 2-layer GRU of 128 units and a 2-layer output MLP giving Q-values for the
environment actions (NONE/TELL) and a message logit. The message of the prisoner in the
room is what the next prisoner in the room receives. While training it goes through the
discretise/regularise unit (DRU) as ``sigmoid(m + noise)``, so the recipient's TD error
flows back through it into the sender, across agents and days; while executing the unit
is a hard threshold ``m > 0``.

Executors play training episodes with the DRU in training mode and record its noise;
the trainer unrolls the whole batch again (``lax.scan`` over days) with its current
parameters and that noise, soft messages included, and differentiates through them.
Only the prisoner in the room acts, so the loss is his TD error on each day,
bootstrapped (undiscounted) from the target network's value for the next day.

Nothing here runs JAX at import time (the procs backend forks after importing it).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax

NUM_ACTIONS = 2  # NONE, TELL
NO_ACTION = NUM_ACTIONS  # the "last action" of a prisoner who was not in the room


@dataclass(frozen=True)
class Config:
    """DIAL's hyper-parameters: the paper's values."""

    num_agents: int = 3
    hidden: int = 128  # 2-layer GRU of 128 units
    sigma: float = 2.0  # the DRU's noise while training
    learning_rate: float = 5e-4  # RMSProp
    rms_decay: float = 0.95  # the paper's "momentum 0.95" (Torch RMSProp's alpha)
    gamma: float = 1.0
    target_period: int = 100  # learner steps (batches) between target-network copies
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
    noise: jax.Array  # (B, T) the DRU's standard-normal noise on each day's message
    messages: jax.Array  # (B, T) the soft message the executor's sender put out that day


FIELDS = Episode._fields


class Core(NamedTuple):
    """The network: ``step(params, x, state)`` and ``initial_state(batch)``."""

    init: Callable[..., Any]
    step: Callable[..., tuple[jax.Array, jax.Array, Any]]
    initial_state: Callable[[int], Any]


def make_core(cfg: Config) -> Core:
    """The per-day step ``(agent (M,), in_room (M,), message (M,), last_action (M,), state)
    -> (q (M, 2), message logit (M,), state)``, M = batch x agents."""
    h = cfg.hidden

    def step(
        agent: jax.Array, obs: jax.Array, message: jax.Array, last: jax.Array, state: Any
    ) -> tuple[jax.Array, jax.Array, Any]:
        z = hk.Embed(cfg.num_agents, h, name="agent")(agent)
        z += hk.Embed(2, h, name="obs")(obs)
        z += hk.Embed(NUM_ACTIONS + 1, h, name="last_action")(last)
        m = jax.nn.relu(hk.Linear(h, name="message_in")(message[:, None]))
        z += hk.Linear(h, name="message_in2")(m)
        out, state = hk.DeepRNN([hk.GRU(h, name="gru1"), hk.GRU(h, name="gru2")])(z, state)
        out = jax.nn.relu(hk.Linear(h, name="head")(out))
        out = hk.Linear(NUM_ACTIONS + 1, name="out")(out)
        return out[:, :NUM_ACTIONS], out[:, NUM_ACTIONS], state

    def initial_state(batch: int) -> Any:
        return (jnp.zeros((batch, h)), jnp.zeros((batch, h)))

    fns: Any = hk.without_apply_rng(hk.transform(step))
    return Core(init=fns.init, step=fns.apply, initial_state=initial_state)


def _day_inputs(
    cfg: Config, in_room: jax.Array, bulb: jax.Array, last: jax.Array
) -> tuple[jax.Array, jax.Array, jax.Array, jax.Array]:
    """One day's inputs, flattened over (B, n): agent index, in-room flag, the message
    received (the bulb for the prisoner in the room, 0 elsewhere) and the last action."""
    batch, n = in_room.shape
    agent = jnp.broadcast_to(jnp.arange(n), (batch, n)).reshape(-1)
    obs = in_room.astype(jnp.int32).reshape(-1)
    received = (in_room * bulb[:, None]).reshape(-1)
    return agent, obs, received, last.reshape(-1)


def unroll(
    cfg: Config,
    core: Core,
    params: Any,
    batch: Episode,
    training: bool = True,
) -> tuple[jax.Array, jax.Array]:
    """Run all prisoners through the recorded episodes with ``params`` (messages through
    the DRU with the recorded noise while training): the Q-values of the prisoner in the
    room on each day (B, T, 2) and the message each day's sender put out (B, T)."""
    size, _, n = batch.in_room.shape

    def day(carry: Any, xs: Any) -> tuple[Any, tuple[jax.Array, jax.Array]]:
        state, bulb, last = carry
        in_room, action, mask, noise = xs
        q, logit, state = core.step(params, *_day_inputs(cfg, in_room, bulb, last), state)
        q = jnp.einsum("bn,bna->ba", in_room, q.reshape(size, n, NUM_ACTIONS))
        spoken = jnp.sum(in_room * logit.reshape(size, n), axis=1)
        if training:
            sent = jax.nn.sigmoid(spoken + cfg.sigma * noise)
        else:
            sent = (spoken > 0).astype(spoken.dtype)
        acted = in_room * mask[:, None]
        last = jnp.where(acted > 0, action[:, None], NO_ACTION).astype(jnp.int32)
        return (state, sent, last), (q, sent)

    carry = (
        core.initial_state(size * n),
        jnp.zeros((size,)),
        jnp.full((size, n), NO_ACTION, jnp.int32),
    )
    xs = tuple(
        jnp.swapaxes(a, 0, 1) for a in (batch.in_room, batch.actions, batch.mask, batch.noise)
    )
    _, (qs, sent) = jax.lax.scan(day, carry, xs)
    return jnp.swapaxes(qs, 0, 1), jnp.swapaxes(sent, 0, 1)


def loss_fn(cfg: Config, core: Core, params: Any, target_params: Any, batch: Episode) -> jax.Array:
    """Mean squared TD error of the prisoner in the room over the days that happened."""
    q, _ = unroll(cfg, core, params, batch)
    q_target, _ = unroll(cfg, core, target_params, batch)
    taken = jnp.take_along_axis(q, batch.actions[..., None], axis=-1)[..., 0]
    next_value = jnp.max(q_target, axis=-1)[:, 1:] * batch.mask[:, 1:]
    bootstrap = jnp.concatenate([next_value, jnp.zeros_like(next_value[:, :1])], axis=1)
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
    update: Callable[[TrainState, Episode], tuple[TrainState, jax.Array]]
    # act(params, in_room (B, n), bulb (B,), last (B, n), state, noise (B,), training)
    #   -> (Q (B, n, 2), message sent (B,), state): one day of B episodes.
    act: Callable[..., tuple[jax.Array, jax.Array, Any]]
    initial_state: Callable[[int], Any]


def make_learning(cfg: Config) -> Learning:
    """Build (and jit) init, update and act for ``cfg``."""
    core = make_core(cfg)
    optimiser = optax.chain(
        optax.clip_by_global_norm(cfg.max_grad_norm),
        optax.rmsprop(cfg.learning_rate, decay=cfg.rms_decay, eps=1e-6),
    )

    def init(key: jax.Array) -> TrainState:
        zeros = jnp.zeros((1,), jnp.int32)
        params = core.init(key, zeros, zeros, jnp.zeros((1,)), zeros, core.initial_state(1))
        return TrainState(params, params, optimiser.init(params), jnp.zeros((), jnp.int32))

    def update(state: TrainState, batch: Episode) -> tuple[TrainState, jax.Array]:
        loss, grads = jax.value_and_grad(
            lambda p: loss_fn(cfg, core, p, state.target_params, batch)
        )(state.params)
        updates, opt_state = optimiser.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        steps = state.steps + 1
        target = optax.periodic_update(params, state.target_params, steps, cfg.target_period)
        return TrainState(params, target, opt_state, steps), loss

    def act(
        params: Any,
        in_room: jax.Array,
        bulb: jax.Array,
        last: jax.Array,
        state: Any,
        noise: jax.Array,
        training: bool,
    ) -> tuple[jax.Array, jax.Array, Any]:
        size, n = in_room.shape
        q, logit, state = core.step(params, *_day_inputs(cfg, in_room, bulb, last), state)
        spoken = jnp.sum(in_room * logit.reshape(size, n), axis=1)
        if training:
            sent = jax.nn.sigmoid(spoken + cfg.sigma * noise)
        else:
            sent = (spoken > 0).astype(spoken.dtype)
        return q.reshape(size, n, NUM_ACTIONS), sent, state

    return Learning(
        init=jax.jit(init),
        update=jax.jit(update),
        act=jax.jit(act, static_argnames="training"),
        initial_state=core.initial_state,
    )


def play_batch(
    learning: Learning,
    params: Any,
    games: Sequence[Any],
    epsilon: float,
    rng: np.random.Generator,
    training: bool = True,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Play one episode in each of ``games`` at once with the ε-greedy policy of
    ``params``. While ``training`` messages go through the DRU with noise drawn here and
    recorded, so the trainer can unroll the same episodes with soft messages; otherwise
    they are hard bits. Returns the padded episodes (the fields of ``Episode``, each with
    a leading axis over games) and each episode's return."""
    size = len(games)
    n, limit = games[0].num_agents, games[0].limit
    data = {
        "in_room": np.zeros((size, limit, n), np.float32),
        "actions": np.zeros((size, limit), np.int32),
        "rewards": np.zeros((size, limit), np.float32),
        "mask": np.zeros((size, limit), np.float32),
        "noise": np.zeros((size, limit), np.float32),
        "messages": np.zeros((size, limit), np.float32),
    }
    observations = [game.reset() for game in games]
    live = np.ones(size, bool)
    state = learning.initial_state(size * n)
    bulb = np.zeros(size, np.float32)
    last = np.full((size, n), NO_ACTION, np.int32)
    for day in range(limit):
        in_room = np.stack([o.in_room for o in observations]).astype(np.float32)
        in_room[~live] = 0.0
        noise = (rng.standard_normal(size) if training else np.zeros(size)).astype(np.float32)
        out = learning.act(params, in_room, bulb, last, state, noise, training)
        q, sent, state = np.asarray(out[0]), np.asarray(out[1]), out[2]
        greedy = q[np.arange(size), in_room.argmax(axis=1)].argmax(axis=1)
        explore = rng.random(size) < epsilon
        actions = np.where(explore, rng.integers(NUM_ACTIONS, size=size), greedy)
        last = np.full((size, n), NO_ACTION, np.int32)
        for b in np.flatnonzero(live):
            game, who = games[b], observations[b].interrogated
            step = game.step([int(actions[b]) if i == who else 0 for i in range(n)], float(sent[b]))
            data["in_room"][b, day] = in_room[b]
            data["actions"][b, day] = actions[b]
            data["rewards"][b, day] = step.reward
            data["mask"][b, day] = 1.0
            data["noise"][b, day] = noise[b]
            data["messages"][b, day] = sent[b]
            last[b, who] = actions[b]
            observations[b] = step.observation
            live[b] = not step.done
        bulb = sent.astype(np.float32)
        if not live.any():
            break
    return data, data["rewards"].sum(axis=1)


def play_episode(
    learning: Learning,
    params: Any,
    game: Any,
    epsilon: float,
    rng: np.random.Generator,
    training: bool = True,
) -> tuple[dict[str, np.ndarray], float]:
    """One episode of ``play_batch``: its fields (no leading axis) and its return."""
    data, returns = play_batch(learning, params, [game], epsilon, rng, training)
    return {k: v[0] for k, v in data.items()}, float(returns[0])
