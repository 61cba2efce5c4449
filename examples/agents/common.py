"""Pieces the CartPole agents share: the environment, a scripted expert, episode loops
and a variable client that keeps an actor's parameters fresh without blocking it.

Nothing here runs JAX at import time: the procs backend forks its executables from a
server that has imported this module, and a process must not fork after JAX has run.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

import gymnasium as gym
import numpy as np

ENV_NAME = "CartPole-v1"
MAX_RETURN = 500.0  # CartPole-v1 is truncated after 500 steps, one reward per step
Policy = Callable[[np.ndarray], int]
T = TypeVar("T")


def make_environment(seed: int | None = None) -> gym.Env[Any, Any]:
    """A CartPole-v1 environment (observations: 4 floats; actions: 0 or 1)."""
    env = gym.make(ENV_NAME)
    env.reset(seed=seed)
    env.action_space.seed(seed)
    return env


def expert_action(observation: np.ndarray) -> int:
    """A scripted CartPole controller: push the cart towards where the pole is falling,
    weighing the pole's angle and angular velocity more than the cart's drift.
    It balances the pole for the full 500 steps from almost every start."""
    x, x_dot, theta, theta_dot = (float(v) for v in observation)
    return int(theta + 0.5 * theta_dot + 0.01 * x + 0.1 * x_dot > 0.0)


def run_episode(env: gym.Env[Any, Any], policy: Policy, seed: int | None = None) -> float:
    """Play one episode with ``policy``; its undiscounted return."""
    observation, _ = env.reset(seed=seed)
    total = 0.0
    while True:
        observation, reward, terminated, truncated, _ = env.step(policy(observation))
        total += float(reward)
        if terminated or truncated:
            return total


def evaluate(env: gym.Env[Any, Any], policy: Policy, episodes: int, seed: int = 0) -> float:
    """Mean return of ``policy`` over ``episodes`` episodes with seeds ``seed``, ``seed+1``..."""
    return float(np.mean([run_episode(env, policy, seed + i) for i in range(episodes)]))


class VariableClient:
    """An actor's copy of a learner's parameters, refreshed every ``update_period`` calls
    to ``update()`` by an asynchronous ``get_variables`` call, so the actor loop never
    waits on the learner (Acme's VariableClient with ``update_period``). The source
    answers ``get_variables(names)`` with a list, one entry per name, as in Acme."""

    def __init__(self, source: Any, update_period: int = 1, key: str = "policy") -> None:
        self._source = source
        self._period = max(1, update_period)
        self._key = key
        self._calls = 0
        self._future: Future[Any] | None = None
        self._lock = threading.Lock()
        self.params: Any = None

    def update(self, wait: bool = False) -> None:
        """Count one call; start a refresh every ``update_period`` calls and adopt it once
        it has arrived. With ``wait`` fetch now and block until the answer is here."""
        if wait:
            self.params = self._fetch()
            return
        with self._lock:
            self._calls += 1
            future = self._future
            if future is not None and future.done():
                self._future = None
                try:
                    self.params = future.result()[0]
                except Exception:  # a learner restarting: keep acting with what we have
                    pass
            elif future is None and self._calls >= self._period:
                self._calls = 0
                self._future = self._source.futures.get_variables([self._key])

    def _fetch(self) -> Any:
        return self._source.get_variables([self._key])[0]


def until_stopped(fn: Callable[[], T], stop: threading.Event, poll_s: float = 0.1) -> T | None:
    """``fn()``, or None once ``stop`` is set first. ``fn`` runs in a daemon thread that is
    abandoned at the stop: a Reverb sample has no timeout and may wait for ever on a
    replay server that has shut down, which must not hold the node past the grace period."""
    box: list[Any] = []
    done = threading.Event()

    def call() -> None:
        try:
            box.append((True, fn()))
        except BaseException as exc:  # handed to the caller below
            box.append((False, exc))
        done.set()

    context = contextvars.copy_context()  # the node's identity, for topo calls inside fn
    threading.Thread(target=context.run, args=(call,), name="until-stopped", daemon=True).start()
    while not done.wait(poll_s):
        if stop.is_set():
            return None
    ok, value = box[0]
    if not ok:
        if stop.is_set():  # it failed because the program is stopping (the replay closed)
            return None
        raise value
    return value  # type: ignore[no-any-return]


class Stopping(RuntimeError):
    """A call abandoned because the program is stopping (its peer may be gone already)."""


def program_stop_event() -> threading.Event:
    """The program's stop event; a private one (never set) outside a topo program."""
    import topo

    try:
        return topo.stop_event()
    except RuntimeError:
        return threading.Event()


def result_unless_stopped(
    future: Future[T], stop: threading.Event, timeout: float | None = None, poll_s: float = 0.1
) -> T:
    """``future``'s result, waiting at most ``timeout`` seconds (None: as long as the call's
    own deadline); raises :class:`Stopping` once ``stop`` is set first. A peer that stopped
    before answering would otherwise hold the caller until the call's deadline, long past
    the stop's grace period, and the node would be killed instead of stopping."""
    end = None if timeout is None else time.monotonic() + timeout
    while True:
        if stop.is_set() and not future.done():
            raise Stopping("the program is stopping")
        wait = poll_s if end is None else min(poll_s, max(0.0, end - time.monotonic()))
        try:
            return future.result(timeout=wait)
        except FutureTimeout:
            if end is not None and time.monotonic() >= end:
                raise


class StopAware:
    """A topo handle whose blocking calls give up with :class:`Stopping` once the program
    stops (each call goes through the handle's ``futures``); anything without
    ``futures`` (a local object in tests) is called directly."""

    def __init__(self, handle: Any, stop: threading.Event | None = None) -> None:
        self._handle = handle
        self._stop = stop if stop is not None else program_stop_event()

    def __getattr__(self, name: str) -> Callable[..., Any]:
        futures = getattr(self._handle, "futures", None)
        if futures is None:
            return getattr(self._handle, name)  # type: ignore[no-any-return]
        method = getattr(futures, name)
        stop = self._stop

        def call(*args: Any, **kwargs: Any) -> Any:
            return result_unless_stopped(method(*args, **kwargs), stop)

        return call
