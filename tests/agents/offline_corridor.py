"""A dataset for the offline agent on the dm_env corridor (tests/agents/dm_corridor.py),
played through the adapter: half the episodes by a guide that walks towards the cued
goal (ε-greedy at 0.3), half at random. Cloning it plays the guide: the goal every time;
the data alone scores about 0.7, chance 0.5."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from examples.agents import demonstrations as demos
from examples.agents.envs import make_environment

CORRIDOR = "dm_env:tests.agents.dm_corridor:corridor"


def guide(observation: np.ndarray) -> int:
    """Walk towards the goal the cue (the last value) shows: 1 right, 0 left."""
    return int(observation[-1] > 0)


def record(episodes: int, seed: int) -> demos.Episodes:
    """``episodes`` corridor episodes, the guide playing the even ones, chance the odd."""
    rng = np.random.default_rng(seed)
    env = make_environment(CORRIDOR, seed)
    rows: dict[str, list[Any]] = {k: [] for k in (*demos.FIELDS, "episode")}
    returns, who = [], []
    for index in range(episodes):
        observation, _ = env.reset(seed=int(rng.integers(2**31)))
        epsilon = 0.3 if index % 2 == 0 else 1.0
        total = 0.0
        while True:
            random = rng.random() < epsilon
            action = int(rng.integers(2)) if random else guide(observation)
            after, reward, terminated, truncated, _ = env.step(action)
            values = (observation, action, reward, 0.0 if terminated else 1.0, after, index)
            for key, value in zip((*demos.FIELDS, "episode"), values, strict=True):
                rows[key].append(value)
            total += float(reward)
            observation = after
            if terminated or truncated:
                break
        returns.append(total)
        who.append(index % 2)
    return demos.Episodes.from_steps(rows, who, returns)


def corridor_dataset(
    random_key: Any, episodes: int = 100, batch_size: int = 64, **_: Any
) -> Iterator[demos.Batch]:
    """The factory ``-p dataset=tests.agents.offline_corridor:corridor_dataset`` names
    (the topology's ``path`` is not used: the data is recorded in memory)."""
    seed = demos.int_seed(random_key)
    return demos.batches(record(episodes, seed), batch_size, seed + 1)
