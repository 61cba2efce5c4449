"""The environments the agents play, named by a string, behind one interface
(gymnasium's ``reset``/``step``):

- a gymnasium id with discrete actions: ``CartPole-v1`` (the default), ``Acrobot-v1``,
  ``MountainCar-v0``, or ``gym:ID``;
- a dm_env environment: ``dm_env:package.module:factory``, the factory called with
  ``seed=`` when it takes one (``DmEnvAdapter`` puts it behind gymnasium's interface).

Observations come out flat, as float32 (the agents' MLPs and the replay's signature are
made from ``spec_of(name)``: the observation's size and the number of actions). An
environment whose actions are not discrete is refused by name.

Nothing here imports JAX or TensorFlow (node processes fork after importing it).
"""

from __future__ import annotations

import functools
import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

DEFAULT = "CartPole-v1"
DM_ENV = "dm_env:"
GYM = "gym:"


class EnvError(ValueError):
    """An environment name that cannot be made, or one the agents cannot play."""


@dataclass(frozen=True)
class EnvSpec:
    """What the agents build from an environment."""

    name: str
    observation_size: int  # the flat observation's length
    num_actions: int  # actions are 0 .. num_actions - 1
    max_episode_steps: int | None  # where the environment truncates, when it says


def make_environment(name: str = DEFAULT, seed: int | None = None) -> gym.Env[Any, Any]:
    """The environment ``name`` (see the module docstring), seeded with ``seed``."""
    if name.startswith(DM_ENV):
        env: gym.Env[Any, Any] = DmEnvAdapter(_factory(name[len(DM_ENV) :]), seed)
    else:
        env = _gym(name.removeprefix(GYM))
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return env


@functools.lru_cache(maxsize=32)
def spec_of(name: str = DEFAULT) -> EnvSpec:
    """The observation size and action count of ``name`` (made once per process)."""
    env = make_environment(name, 0)
    try:
        observation, _ = env.reset(seed=0)
        space = env.action_space
        assert isinstance(space, gym.spaces.Discrete)  # (checked where it was made)
        limit = env.spec.max_episode_steps if env.spec is not None else None
        return EnvSpec(name, int(np.asarray(observation).size), int(space.n), limit)
    finally:
        env.close()


def _gym(env_id: str) -> gym.Env[Any, Any]:
    try:
        env = gym.make(env_id)
    except gym.error.Error as exc:
        raise EnvError(f"environment {env_id!r}: {exc}") from None
    if not isinstance(env.action_space, gym.spaces.Discrete):
        env.close()
        raise EnvError(
            f"environment {env_id!r} has actions {env.action_space}: the agents need "
            "discrete actions (gymnasium's Discrete)"
        )
    if int(env.action_space.start) != 0:  # actions 0..n-1 to the agent, shifted here
        env = gym.wrappers.TransformAction(
            env,
            functools.partial(_shifted, int(env.action_space.start)),
            gym.spaces.Discrete(int(env.action_space.n)),
        )
    return gym.wrappers.TransformObservation(env, _flat, _flat_space(env.observation_space))


def _shifted(start: int, action: Any) -> int:
    return int(action) + start


def _flat(observation: Any) -> np.ndarray:
    return np.asarray(observation, np.float32).reshape(-1)


def _flat_space(space: gym.Space[Any]) -> gym.spaces.Box:
    size = int(np.prod(space.shape)) if space.shape else 1
    return gym.spaces.Box(-np.inf, np.inf, (size,), np.float32)


def _factory(path: str) -> Callable[..., Any]:
    module, _, attr = path.partition(":")
    if not module or not attr:
        raise EnvError(f"dm_env environment {path!r}: expected dm_env:package.module:factory")
    try:
        return getattr(importlib.import_module(module), attr)  # type: ignore[no-any-return]
    except (ImportError, AttributeError) as exc:
        raise EnvError(f"dm_env environment {path!r}: {exc}") from None


class DmEnvAdapter(gym.Env[np.ndarray, np.int64]):
    """A dm_env environment as a gymnasium one. A last step with discount 0 is an end
    (``terminated``), one with a discount above 0 a cut (``truncated``), as Acme's
    wrappers read them. ``reset(seed=s)`` makes the environment again with ``seed=s``
    when its factory takes a seed (dm_env has no reseeding of its own)."""

    def __init__(self, factory: Callable[..., Any], seed: int | None = None) -> None:
        self._factory = factory
        self._seeded = "seed" in inspect.signature(factory).parameters
        self._env = self._make(seed)
        spec = self._env.action_spec()
        if not np.issubdtype(spec.dtype, np.integer):
            raise EnvError(
                f"dm_env environment {factory.__name__} has actions of {spec.dtype}: the "
                "agents need discrete actions"
            )
        self._first = int(getattr(spec, "minimum", 0))
        count = getattr(spec, "num_values", None)
        if count is None:
            count = int(spec.maximum) - self._first + 1
        self.action_space = gym.spaces.Discrete(int(count))
        shape = self._env.observation_spec().shape
        self.observation_space = _flat_space(gym.spaces.Box(-np.inf, np.inf, shape))

    def _make(self, seed: int | None) -> Any:
        return self._factory(seed=seed) if self._seeded else self._factory()

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None and self._seeded:
            self._env.close()
            self._env = self._make(seed)
        return _flat(self._env.reset().observation), {}

    def step(
        self, action: int | np.integer[Any]
    ) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        step = self._env.step(np.asarray(int(action) + self._first))
        last = bool(step.last())
        ended = last and float(step.discount) == 0.0
        return _flat(step.observation), float(step.reward or 0.0), ended, last and not ended, {}

    def close(self) -> None:
        self._env.close()
