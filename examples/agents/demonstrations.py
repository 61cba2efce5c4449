"""Demonstrations for the offline CartPole agent: the scripted expert's play, recorded.

``demonstration_dataset(random_key, ...)`` is the default dataset factory of
``examples/topologies/acme_offline.yaml`` (Acme's ``demonstration_dataset_factory``): the
learner calls it with a key and the YAML's ``dataset_args`` and draws batches from the
iterator it returns. Swap in your own with ``-p dataset=package.module:factory``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from examples.agents.common import expert_action, make_environment

Batch = dict[str, np.ndarray]
NUM_ACTIONS = 2


@dataclass(frozen=True)
class Demonstrations:
    """Transitions recorded from the scripted expert: ``action`` is the expert's label for
    ``observation``; ``taken`` is what the (noisy) demonstrator actually played there."""

    observation: np.ndarray  # (N, 4) float32
    action: np.ndarray  # (N,) int32
    taken: np.ndarray  # (N,) int32
    episode_returns: np.ndarray  # (episodes,) float64: the noisy demonstrator's returns

    def __len__(self) -> int:
        return int(self.action.shape[0])


def make_demonstrations(episodes: int = 20, seed: int = 0, noise: float = 0.3) -> Demonstrations:
    """Play ``episodes`` CartPole episodes with the scripted expert acting uniformly at
    random with probability ``noise`` (DART-style noise injection), labelling every state
    with the expert's own action.

    Why noisy play with clean labels: a noiseless expert keeps the pole in a narrow band,
    so a cloned policy that errs once lands in states it never saw. The random actions
    push the demonstrator into those states and the expert's labels show how to recover;
    recording the random actions instead would only add label noise and teach nothing
    more. (``taken`` keeps the played actions for learners that want them.)"""
    if episodes < 1:
        raise ValueError(f"episodes must be ≥ 1, got {episodes}")
    if not 0.0 <= noise <= 1.0:
        raise ValueError(f"noise must be in [0, 1], got {noise}")
    rng = np.random.default_rng(seed)
    env = make_environment(seed)
    observations: list[np.ndarray] = []
    labels: list[int] = []
    taken: list[int] = []
    returns = []
    for _ in range(episodes):
        observation, _ = env.reset(seed=int(rng.integers(2**31)))
        total = 0.0
        while True:
            label = expert_action(observation)
            action = int(rng.integers(NUM_ACTIONS)) if rng.random() < noise else label
            observations.append(np.asarray(observation, np.float32))
            labels.append(label)
            taken.append(action)
            observation, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        returns.append(total)
    env.close()
    return Demonstrations(
        observation=np.stack(observations),
        action=np.asarray(labels, np.int32),
        taken=np.asarray(taken, np.int32),
        episode_returns=np.asarray(returns),
    )


def key_seed(random_key: Any) -> list[int]:
    """The raw words of a JAX PRNG key (or of topo's ``${seed.key}``, its raw data)."""
    return [int(v) for v in np.asarray(random_key, dtype=np.uint32).ravel()]


def int_seed(random_key: Any) -> int:
    """A non-negative 31-bit integer seed derived from a PRNG key (for numpy, gymnasium)."""
    return int(np.random.SeedSequence(key_seed(random_key)).generate_state(1)[0] >> 1)


def batches(demos: Demonstrations, batch_size: int, seed: Any = 0) -> Iterator[Batch]:
    """Endless minibatches drawn uniformly (with replacement) from ``demos``."""
    rng = np.random.default_rng(seed)
    while True:
        index = rng.integers(0, len(demos), size=batch_size)
        yield {"observation": demos.observation[index], "action": demos.action[index]}


def demonstration_dataset(
    random_key: Any, episodes: int = 20, noise: float = 0.3, batch_size: int = 256
) -> Iterator[Batch]:
    """The default demonstration dataset factory (Acme's ``demonstration_dataset_factory``):
    minibatches of ``make_demonstrations(episodes, seed, noise)``, all seeded by the key."""
    seed = int_seed(random_key)
    return batches(make_demonstrations(episodes, seed, noise), batch_size, seed + 1)
