"""A small dm_env environment for the agents' tests: a corridor of ``length`` cells, the
agent starting near the middle; action 1 steps right, 0 left. Each episode draws which
end is the goal and shows it: reaching the goal is a reward of 1 and an end (discount
0), the other end an end with nothing; after ``limit`` steps the episode is cut (a
last step with discount 1). A policy must read the cue to score 1 every time; a random
one scores about a half. Observations are the position one-hot and the cue (+1: the
goal is right, -1: left), shaped (length + 1, 1) to show the adapter flattens them;
actions are a BoundedArray from ``first`` (to show the adapter shifts them to 0..n-1)."""

from __future__ import annotations

import dm_env
import numpy as np
from dm_env import specs


class Corridor(dm_env.Environment):
    def __init__(self, length: int = 5, limit: int = 20, first: int = 0, seed: int = 0) -> None:
        self.length, self.limit, self.first = length, limit, first
        self._rng = np.random.default_rng(seed)
        self._at = self._steps = 0
        self._right = True  # where the goal is
        self.seed = seed

    def _observation(self) -> np.ndarray:
        out = np.zeros((self.length + 1, 1), np.float32)
        out[self._at, 0] = 1.0
        out[self.length, 0] = 1.0 if self._right else -1.0
        return out

    def reset(self) -> dm_env.TimeStep:
        # a seeded start, one cell left or right of the middle, and a seeded goal
        self._at = self.length // 2 + int(self._rng.integers(-1, 2))
        self._right = bool(self._rng.integers(2))
        self._steps = 0
        return dm_env.restart(self._observation())

    def step(self, action: np.ndarray) -> dm_env.TimeStep:
        move = int(action) - self.first
        assert move in (0, 1), action
        self._at += 1 if move else -1
        self._steps += 1
        if self._at in (0, self.length - 1):
            reached = (self._at > 0) == self._right
            return dm_env.termination(1.0 if reached else 0.0, self._observation())
        if self._steps >= self.limit:
            return dm_env.truncation(0.0, self._observation())
        return dm_env.transition(0.0, self._observation())

    def observation_spec(self) -> specs.Array:
        return specs.Array((self.length + 1, 1), np.float32)

    def action_spec(self) -> specs.BoundedArray:
        return specs.BoundedArray((), np.int64, self.first, self.first + 1)


def corridor(seed: int | None = None) -> Corridor:
    """The factory ``dm_env:tests.agents.dm_corridor:corridor`` names."""
    return Corridor(seed=0 if seed is None else seed)


def shifted() -> Corridor:
    """Actions 3 and 4 (no seed argument: the adapter makes it once)."""
    return Corridor(first=3, limit=3)


def continuous() -> dm_env.Environment:
    """An environment with continuous actions, which the agents cannot play."""

    class Continuous(Corridor):
        def action_spec(self) -> specs.BoundedArray:
            return specs.BoundedArray((1,), np.float32, -1.0, 1.0)

    return Continuous()
