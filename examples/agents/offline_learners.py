"""The offline agent's learning rules on JAX/Haiku/Optax: BC, filtered BC and CRR.

Both share one interface (``Algorithm``): ``init`` builds the training state from a key
and a batch, ``step`` is one jitted update on a batch of transitions, ``policy_params``
picks the policy network's parameters out of the state (what evaluators play greedily).

- ``bc``: Acme's BCLearner for discrete actions: softmax cross-entropy of the policy's
  logits against the actions played.
- ``filtered_bc``: behaviour cloning on the transitions of the best episodes only (those
  whose episode return is in the top ``top_fraction`` of the batch), the "filtered BC"
  baseline of the offline RL literature; it needs the dataset's ``episode_return``.
- ``crr``: Critic Regularized Regression (Wang et al. 2020; Acme's ``agents/jax/crr``),
  for discrete actions: a Q-network learns the policy's values by TD (targets from a
  periodically copied target network, the next state's value the expectation of the
  target Q-values under the policy); the policy regresses onto the actions played, each
  weighted by a function of its advantage ``Q(s, a) - Σ_b π(b|s) Q(s, b)``: ``exp(A/β)``
  clipped at ``ratio_upper_bound`` or the indicator ``A > 0`` (Acme's
  ``policy_loss_coeff_advantage_exp`` and ``_indicator``). With discrete actions the
  expectation over the policy is exact, where Acme samples actions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import optax

NUM_ACTIONS = 2  # CartPole's; the learners take ``num_actions`` from the environment's spec
Params = Any  # a haiku parameter tree
Batch = Mapping[str, Any]
StepFn = Callable[[Any, Batch], tuple[Any, dict[str, jax.Array]]]


def make_network(
    hidden_sizes: Sequence[int] = (64, 64), name: str = "mlp", num_actions: int = NUM_ACTIONS
) -> hk.Transformed:
    """An MLP from observations (of any size: haiku takes it from the first batch) to one
    output per action: the policy's logits (``mlp``) or the critic's Q-values (``critic``)."""

    def forward(observation: jax.Array) -> jax.Array:
        return hk.nets.MLP([*hidden_sizes, num_actions], name=name)(observation)

    return hk.without_apply_rng(hk.transform(forward))


@dataclass(frozen=True)
class Algorithm:
    """A learning rule: its state's constructor, its jitted step, and where the policy's
    parameters are in the state."""

    name: str
    init: Callable[[jax.Array, Batch], Any]
    step: StepFn
    policy_params: Callable[[Any], Params]


# -- behaviour cloning ----------------------------------------------------------------------


class BCState(NamedTuple):
    """What one behaviour-cloning step reads and writes."""

    params: Params
    opt_state: optax.OptState
    steps: jax.Array


def filter_weights(episode_return: jax.Array, top_fraction: float) -> jax.Array:
    """Filtered BC's weights: 1 for the transitions whose episode's return is at least the
    batch's ``1 - top_fraction`` quantile (ties kept), 0 for the others."""
    threshold = jnp.quantile(episode_return, 1.0 - top_fraction)
    return (episode_return >= threshold).astype(jnp.float32)


def make_bc(
    hidden_sizes: Sequence[int] = (64, 64),
    learning_rate: float = 1e-3,
    top_fraction: float | None = None,
    num_actions: int = NUM_ACTIONS,
) -> Algorithm:
    """Behaviour cloning: cross-entropy of the policy's logits against the played actions;
    with ``top_fraction``, filtered BC: only on the transitions of each batch that come
    from its best-returning episodes (``filter_weights``; needs ``episode_return``)."""
    if top_fraction is not None and not 0.0 < top_fraction <= 1.0:
        raise ValueError(f"top_fraction must be in (0, 1], got {top_fraction}")
    network = make_network(hidden_sizes, num_actions=num_actions)
    optimizer = optax.adam(learning_rate)

    def loss_fn(params: Params, batch: Batch) -> tuple[jax.Array, jax.Array]:
        logits = network.apply(params, batch["observation"])
        labels = batch["action"]
        losses = optax.softmax_cross_entropy_with_integer_labels(logits, labels)
        correct = jnp.argmax(logits, axis=-1) == labels
        if top_fraction is None:
            return losses.mean(), correct.mean()
        weight = filter_weights(batch["episode_return"], top_fraction)
        kept = jnp.maximum(weight.sum(), 1.0)
        return (weight * losses).sum() / kept, (weight * correct).sum() / kept

    def step(state: BCState, batch: Batch) -> tuple[BCState, dict[str, jax.Array]]:
        (loss, accuracy), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params, batch)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        return BCState(params, opt_state, state.steps + 1), {"loss": loss, "accuracy": accuracy}

    def init(key: jax.Array, batch: Batch) -> BCState:
        params = network.init(key, batch["observation"])
        return BCState(params, optimizer.init(params), jnp.zeros((), jnp.int32))

    name = "bc" if top_fraction is None else "filtered_bc"
    return Algorithm(name, init, jax.jit(step), lambda state: state.params)


def make_filtered_bc(
    hidden_sizes: Sequence[int] = (64, 64),
    learning_rate: float = 1e-3,
    top_fraction: float = 0.2,
    num_actions: int = NUM_ACTIONS,
) -> Algorithm:
    """Filtered (return-conditioned, "%BC") behaviour cloning: BC on the transitions of
    the best-returning ``top_fraction`` of each batch."""
    return make_bc(hidden_sizes, learning_rate, top_fraction, num_actions)


# -- CRR --------------------------------------------------------------------------------------


class CRRState(NamedTuple):
    """The policy, the critic and its target copy, their optimizers, the step count."""

    policy: Params
    critic: Params
    target_critic: Params
    policy_opt: optax.OptState
    critic_opt: optax.OptState
    steps: jax.Array


def crr_losses(
    q: jax.Array,
    logits: jax.Array,
    next_target_q: jax.Array,
    next_logits: jax.Array,
    batch: Batch,
    discount: float,
    coeff: str = "exp",
    beta: float = 1.0,
    ratio_upper_bound: float = 20.0,
) -> dict[str, jax.Array]:
    """CRR's two losses from the networks' outputs on a batch (all ``(B, actions)``):
    ``q`` the critic's Q(s, ·), ``logits`` the policy's at s, ``next_target_q`` the target
    critic's Q(s', ·), ``next_logits`` the policy's at s'. Also returns the TD targets,
    advantages and policy weights (what the tests check by hand)."""
    action = batch["action"]
    q_taken = jnp.take_along_axis(q, action[:, None], axis=-1)[:, 0]
    next_value = (jax.nn.softmax(next_logits) * next_target_q).sum(-1)
    target = batch["reward"] + discount * batch["discount"] * next_value
    target = jax.lax.stop_gradient(target)
    critic_loss = 0.5 * jnp.mean((q_taken - target) ** 2)

    probs = jax.lax.stop_gradient(jax.nn.softmax(logits))
    advantage = jax.lax.stop_gradient(q_taken - (probs * q).sum(-1))
    if coeff == "exp":
        weight = jnp.minimum(jnp.exp(advantage / beta), ratio_upper_bound)
    elif coeff == "indicator":
        weight = (advantage > 0).astype(q.dtype)
    else:
        raise ValueError(f"unknown CRR coefficient {coeff!r}: use 'exp' or 'indicator'")
    log_prob = -optax.softmax_cross_entropy_with_integer_labels(logits, action)
    policy_loss = -jnp.mean(weight * log_prob)
    return {
        "critic_loss": critic_loss,
        "policy_loss": policy_loss,
        "target": target,
        "advantage": advantage,
        "weight": weight,
    }


def make_crr(
    hidden_sizes: Sequence[int] = (64, 64),
    learning_rate: float = 1e-3,
    critic_learning_rate: float = 1e-3,
    discount: float = 0.99,
    coeff: str = "exp",
    beta: float = 1.0,
    target_update_period: int = 100,
    num_actions: int = NUM_ACTIONS,
) -> Algorithm:
    """CRR for discrete actions (see the module docstring); the target critic is copied
    from the critic every ``target_update_period`` steps, as in Acme's CRRLearner."""
    if coeff not in ("exp", "indicator"):
        raise ValueError(f"unknown CRR coefficient {coeff!r}: use 'exp' or 'indicator'")
    policy_net = make_network(hidden_sizes, num_actions=num_actions)
    critic_net = make_network(hidden_sizes, name="critic", num_actions=num_actions)
    policy_optimizer = optax.adam(learning_rate)
    critic_optimizer = optax.adam(critic_learning_rate)

    def losses(
        policy: Params, critic: Params, target_critic: Params, batch: Batch
    ) -> dict[str, jax.Array]:
        return crr_losses(
            critic_net.apply(critic, batch["observation"]),
            policy_net.apply(policy, batch["observation"]),
            critic_net.apply(target_critic, batch["next_observation"]),
            jax.lax.stop_gradient(policy_net.apply(policy, batch["next_observation"])),
            batch,
            discount,
            coeff,
            beta,
        )

    def critic_loss(critic: Params, state: CRRState, batch: Batch) -> jax.Array:
        return losses(state.policy, critic, state.target_critic, batch)["critic_loss"]

    def policy_loss(policy: Params, state: CRRState, batch: Batch) -> tuple[jax.Array, Any]:
        out = losses(policy, state.critic, state.target_critic, batch)
        return out["policy_loss"], out

    def step(state: CRRState, batch: Batch) -> tuple[CRRState, dict[str, jax.Array]]:
        c_loss, c_grads = jax.value_and_grad(critic_loss)(state.critic, state, batch)
        (p_loss, out), p_grads = jax.value_and_grad(policy_loss, has_aux=True)(
            state.policy, state, batch
        )
        c_updates, critic_opt = critic_optimizer.update(c_grads, state.critic_opt)
        p_updates, policy_opt = policy_optimizer.update(p_grads, state.policy_opt)
        critic = optax.apply_updates(state.critic, c_updates)
        policy = optax.apply_updates(state.policy, p_updates)
        steps = state.steps + 1
        target_critic = optax.periodic_update(
            critic, state.target_critic, steps, target_update_period
        )
        metrics = {
            "loss": p_loss,
            "critic_loss": c_loss,
            "mean_q_target": out["target"].mean(),
            "mean_weight": out["weight"].mean(),
        }
        return CRRState(policy, critic, target_critic, policy_opt, critic_opt, steps), metrics

    def init(key: jax.Array, batch: Batch) -> CRRState:
        policy_key, critic_key = jax.random.split(key)
        policy = policy_net.init(policy_key, batch["observation"])
        critic = critic_net.init(critic_key, batch["observation"])
        zero = jnp.zeros((), jnp.int32)
        opts = policy_optimizer.init(policy), critic_optimizer.init(critic)
        return CRRState(policy, critic, critic, *opts, zero)

    return Algorithm("crr", init, jax.jit(step), lambda state: state.policy)


ALGORITHMS: dict[str, Callable[..., Algorithm]] = {
    "bc": make_bc,
    "filtered_bc": make_filtered_bc,
    "crr": make_crr,
}


def make_algorithm(
    name: str, hidden_sizes: Sequence[int], learning_rate: float, **kwargs: Any
) -> Algorithm:
    """The learning rule called ``name`` (``bc`` or ``crr``) with its settings."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown offline learner {name!r}: choose one of {sorted(ALGORITHMS)}")
    return ALGORITHMS[name](hidden_sizes=hidden_sizes, learning_rate=learning_rate, **kwargs)
