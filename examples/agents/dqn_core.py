"""The learning half of the DQN agent: the Q-network, the replay table, n-step transitions
and the jitted double-DQN update. :mod:`examples.agents.dqn` builds the nodes from these.

Importing this module imports jax, haiku, optax and reverb but runs no JAX computation:
the procs backend forks nodes from a server that has imported it, and a process must not
fork after JAX has run. XLA is pinned to one thread per process (set before jax is first
used; the machines these examples run on have few cores shared by many nodes).
"""

from __future__ import annotations

import os

os.environ.setdefault(
    "XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's start-up INFO/WARNING lines

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
import reverb
import tensorflow as tf

from examples.agents.envs import DEFAULT, spec_of

TABLE = "priority_table"
FIELDS = ("observation", "action", "reward", "discount", "next_observation")
Transition = dict[str, np.ndarray | np.generic]  # arrays and numpy scalars


def seed_of(random_key: Any) -> int:
    """A 32-bit seed from topo's ``${seed.key}`` (``[0, seed]``, a PRNGKey's data) or an int."""
    if isinstance(random_key, int | np.integer):
        return int(random_key) & 0xFFFFFFFF
    return int(np.asarray(random_key).reshape(-1)[-1]) & 0xFFFFFFFF


# ----------------------------------------------------------------------------- replay


def _signature(observation_size: int) -> dict[str, tf.TensorSpec]:
    """The table's item signature: one step of each field (the writer's leading time axis)."""
    return {
        "observation": tf.TensorSpec([1, observation_size], tf.float32),
        "action": tf.TensorSpec([1], tf.int32),
        "reward": tf.TensorSpec([1], tf.float32),
        "discount": tf.TensorSpec([1], tf.float32),
        "next_observation": tf.TensorSpec([1, observation_size], tf.float32),
    }


def make_replay_tables(
    prioritized: bool = True,
    priority_exponent: float = 0.6,
    max_size: int = 100_000,
    min_size_to_sample: int = 1_000,
    samples_per_insert: float | None = 8.0,
    samples_per_insert_tolerance: float = 0.1,
    env: str = DEFAULT,
) -> list[reverb.Table]:
    """The replay: one table of n-step transitions of environment ``env`` (its
    observation's size makes the signature), prioritised or uniform, FIFO removal.
    With ``samples_per_insert`` a SampleToInsertRatio limiter keeps learner and actors in
    step (Acme's: the error buffer is ``min_size * samples_per_insert * tolerance``);
    ``None`` gives a MinSize limiter that never holds the actors back."""
    limiter: reverb.rate_limiters.RateLimiter
    if samples_per_insert is None:
        limiter = reverb.rate_limiters.MinSize(max(1, min_size_to_sample))
    else:
        error_buffer = max(
            2.0 * samples_per_insert,
            min_size_to_sample * samples_per_insert * samples_per_insert_tolerance,
        )
        limiter = reverb.rate_limiters.SampleToInsertRatio(
            samples_per_insert, max(1, min_size_to_sample), error_buffer
        )
    sampler = (
        reverb.selectors.Prioritized(priority_exponent)
        if prioritized
        else reverb.selectors.Uniform()
    )
    table = reverb.Table(
        name=TABLE,
        sampler=sampler,
        remover=reverb.selectors.Fifo(),
        max_size=max_size,
        rate_limiter=limiter,
        signature=_signature(spec_of(env).observation_size),
    )
    return [table]


def replay_dataset(address: str, batch_size: int, timeout_ms: int = 1_000) -> Any:
    """Batches of sampled transitions from the table at ``address`` as numpy (a
    ``reverb.TrajectoryDataset``); the iterator ends when the rate limiter has held a
    sample back for ``timeout_ms``, so a learner can look at its stop event."""
    dataset = reverb.TrajectoryDataset.from_table_signature(
        server_address=address,
        table=TABLE,
        max_in_flight_samples_per_worker=2 * batch_size,
        rate_limiter_timeout_ms=timeout_ms,
        get_signature_timeout_secs=3,  # a stopped server must not hold the learner
    )
    return dataset.batch(batch_size, drop_remainder=True).prefetch(1).as_numpy_iterator()


class NStep:
    """Turns steps into n-step transitions: the discounted sum of up to ``n`` rewards and
    the discount to apply to the bootstrap value (``discount**k``, 0 after a terminal
    state; a time-limit truncation still bootstraps)."""

    def __init__(self, n: int = 3, discount: float = 0.99) -> None:
        self.n = max(1, n)
        self.discount = discount
        self._window: deque[tuple[np.ndarray, int, float]] = deque()

    def add(
        self,
        observation: np.ndarray,
        action: int,
        reward: float,
        next_observation: np.ndarray,
        terminated: bool,
        truncated: bool,
    ) -> list[Transition]:
        """Record one step; the transitions that are complete now."""
        self._window.append((observation, action, reward))
        out: list[Transition] = []
        if terminated or truncated:
            while self._window:
                out.append(self._pop(next_observation, terminated))
        elif len(self._window) == self.n:
            out.append(self._pop(next_observation, False))
        return out

    def _pop(self, next_observation: np.ndarray, terminated: bool) -> Transition:
        total, scale = 0.0, 1.0
        for _, _, reward in self._window:
            total += scale * reward
            scale *= self.discount
        observation, action, _ = self._window.popleft()
        return {
            "observation": np.asarray(observation, np.float32),
            "action": np.int32(action),
            "reward": np.float32(total),
            "discount": np.float32(0.0 if terminated else scale),
            "next_observation": np.asarray(next_observation, np.float32),
        }


# ----------------------------------------------------------------------------- network


def make_network(hidden_sizes: Sequence[int] = (64, 64), num_actions: int = 2) -> hk.Transformed:
    """The Q-network: an MLP from observations to one value per action (``num_actions``:
    the environment's, ``envs.spec_of``; 2 is CartPole's)."""

    def forward(observation: jax.Array) -> jax.Array:
        return hk.nets.MLP([*hidden_sizes, num_actions])(observation)

    return hk.without_apply_rng(hk.transform(forward))


def init_params(network: hk.Transformed, seed: int, observation_size: int = 4) -> Any:
    """Fresh network parameters for observations of ``observation_size`` (4: CartPole's;
    runs JAX: call it in a node, never at import)."""
    observation = jnp.zeros((1, observation_size), jnp.float32)
    return network.init(jax.random.PRNGKey(seed), observation)


def numpy_layers(params: Any) -> list[tuple[np.ndarray, np.ndarray]]:
    """The MLP's (weights, bias) per layer, in order, as numpy arrays."""
    names = sorted(params, key=lambda name: int(name.rsplit("_", 1)[-1]))
    return [(np.asarray(params[n]["w"]), np.asarray(params[n]["b"])) for n in names]


def numpy_q_values(layers: list[tuple[np.ndarray, np.ndarray]], observation: np.ndarray) -> Any:
    """The Q-network's forward pass in numpy: acting one observation at a time costs a
    few microseconds this way, against tens for a jitted call (actors are CPU bound)."""
    x = np.asarray(observation, np.float32)
    for i, (w, b) in enumerate(layers):
        x = x @ w + b
        if i < len(layers) - 1:
            x = np.maximum(x, 0.0)
    return x


def apex_epsilon(actor_id: int, num_actors: int, base: float = 0.4, alpha: float = 7.0) -> float:
    """Ape-X's per-actor exploration: ``base ** (1 + alpha * i / (N - 1))`` (one actor: the
    middle of that range)."""
    if num_actors <= 1:
        return float(base ** (1.0 + alpha / 2.0))
    return float(base ** (1.0 + alpha * actor_id / (num_actors - 1)))


def epsilon_greedy(
    layers: list[tuple[np.ndarray, np.ndarray]],
    observation: np.ndarray,
    epsilon: float,
    rng: np.random.Generator,
) -> int:
    """A random action with probability ``epsilon``, else the greedy one (the actions:
    the last layer's outputs)."""
    if epsilon > 0.0 and rng.random() < epsilon:
        return int(rng.integers(len(layers[-1][1])))
    return int(np.argmax(numpy_q_values(layers, observation)))


# ----------------------------------------------------------------------------- learning


class TrainingState(NamedTuple):
    """Everything a learner step reads and writes."""

    params: Any
    target_params: Any
    opt_state: Any
    steps: Any


def make_optimizer(learning_rate: float, max_gradient_norm: float = 10.0) -> Any:
    """Adam with the gradient's global norm clipped."""
    return optax.chain(optax.clip_by_global_norm(max_gradient_norm), optax.adam(learning_rate))


def initial_state(
    network: hk.Transformed, optimizer: Any, seed: int, observation_size: int = 4
) -> TrainingState:
    """Fresh online and target parameters (equal) and optimizer state."""
    params = init_params(network, seed, observation_size)
    return TrainingState(params, params, optimizer.init(params), jnp.asarray(0, jnp.int32))


def make_sgd_step(
    network: hk.Transformed,
    optimizer: Any,
    target_update_period: int,
    importance_sampling_exponent: float = 0.2,
    huber_delta: float = 1.0,
) -> Callable[..., tuple[TrainingState, jax.Array, jax.Array]]:
    """The jitted update ``(state, batch, probabilities) -> (state, loss, |td error|)``:
    double Q-learning on n-step transitions (the online net picks the next action, the
    target net values it), a Huber loss weighted by importance sampling (prioritised
    replay), and the target net copied from the online one every ``target_update_period``
    steps."""

    def loss_fn(
        params: Any, target_params: Any, batch: dict[str, jax.Array], probabilities: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        q_tm1 = network.apply(params, batch["observation"])
        q_t_target = network.apply(target_params, batch["next_observation"])
        q_t_online = network.apply(params, batch["next_observation"])
        best = jnp.argmax(q_t_online, axis=-1)
        bootstrap = jnp.take_along_axis(q_t_target, best[:, None], axis=-1)[:, 0]
        target = batch["reward"] + batch["discount"] * bootstrap
        chosen = jnp.take_along_axis(q_tm1, batch["action"][:, None], axis=-1)[:, 0]
        td_error = jax.lax.stop_gradient(target) - chosen
        weights = (1.0 / probabilities) ** importance_sampling_exponent
        weights = weights / jnp.max(weights)
        loss = jnp.mean(weights * optax.huber_loss(td_error, delta=huber_delta))
        return loss, td_error

    def step(
        state: TrainingState, batch: dict[str, jax.Array], probabilities: jax.Array
    ) -> tuple[TrainingState, jax.Array, jax.Array]:
        grad_fn = jax.value_and_grad(loss_fn, has_aux=True)
        (loss, td_error), grads = grad_fn(state.params, state.target_params, batch, probabilities)
        updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
        params = optax.apply_updates(state.params, updates)
        steps = state.steps + 1
        target = optax.periodic_update(params, state.target_params, steps, target_update_period)
        return TrainingState(params, target, opt_state, steps), loss, jnp.abs(td_error)

    return jax.jit(step)


def flat_batch(data: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """A sampled batch without the writer's one-step time axis."""
    return {k: np.asarray(data[k])[:, 0] for k in FIELDS}
