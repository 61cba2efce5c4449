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

from examples.agents import envs
from examples.agents.envs import DEFAULT
from topo.runtime.errors import DeadlineExceeded

MAX_RETURN = 500.0  # CartPole-v1 is truncated after 500 steps, one reward per step
Policy = Callable[[np.ndarray], int]
T = TypeVar("T")


def make_environment(seed: int | None = None, env: str = DEFAULT) -> gym.Env[Any, Any]:
    """The environment ``env`` (``envs``: a gymnasium id or a dm_env factory; CartPole-v1
    by default: observations 4 floats, actions 0 or 1), seeded."""
    return envs.make_environment(env, seed)


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
    """An actor's copy of a learner's parameters, kept fresh the way Acme's VariableClient
    keeps it: the actor calls ``update()`` every step, and every ``update_period`` calls
    a ``get_variables`` call goes out in a background thread (a topo RPC); its answer is
    adopted as soon as it is back, so the actor loop never waits on the learner (only the
    first fetch, ``update(wait=True)``, blocks). The source answers
    ``get_variables(names)`` with a list, one entry per name, as in Acme.

    ``version`` counts the answers adopted and ``requested_at`` is the ``update()`` call
    at which the request behind the current parameters went out: the parameters in use
    are never older than the requests made since then."""

    def __init__(
        self,
        source: Any,
        update_period: int = 1,
        key: str = "policy",
        stop: threading.Event | None = None,
    ) -> None:
        self._source = source
        self._stop = stop  # ends the first fetch's wait (None: the program's stop)
        self._period = max(1, update_period)
        self._key = key
        self._calls = 0  # update() calls since the last request went out
        self._total = 0  # update() calls ever
        self._future: Future[Any] | None = None
        self._future_at = 0
        self._lock = threading.Lock()
        self.params: Any = None
        self.version = 0
        self.requested_at = 0

    def update(self, wait: bool = False) -> None:
        """Count one call; adopt an answer that has arrived; send a request once
        ``update_period`` calls have passed and none is in flight. With ``wait`` fetch
        now and block until the answer is here."""
        with self._lock:
            self._total += 1
            if wait:
                self._future = None  # an answer still in flight is older than this one
                self._calls = 0
                self._adopt(self._fetch(), self._total)
                return
            self._calls += 1
            future = self._future
            if future is not None and future.done():
                self._future = None
                try:
                    self._adopt(future.result()[0], self._future_at)
                except Exception:  # a learner restarting: keep acting with what we have
                    pass
            if self._future is None and self._calls >= self._period:
                self._calls = 0
                self._future_at = self._total
                self._future = self._request()

    def _adopt(self, params: Any, requested_at: int) -> None:
        self.params = params
        self.version += 1
        self.requested_at = requested_at

    def _fetch(self) -> Any:
        if self.params is not None:
            return self._source.get_variables([self._key])[0]
        # The first fetch waits for the learner however long its setup takes, as Acme's
        # client blocks on it: on a loaded machine a learner's first JIT compile outlasted
        # the call's deadline (the DIAL trainer on threads, load 20 on 2 cores). A call
        # that timed out goes out again; the program's stop ends the wait (``Stopping``).
        source = StopAware(self._source, self._stop)
        waited = 0
        while True:
            try:
                return source.get_variables([self._key])[0]
            except DeadlineExceeded:
                waited += 1
                print(f"still waiting for the learner's first parameters ({waited})", flush=True)

    def _request(self) -> Future[Any]:
        """``get_variables`` in a daemon thread (as Acme's client uses a worker thread):
        its future is done as soon as the answer is back, whatever the actor does
        meanwhile, and a call to a learner that went away cannot hold the exit."""
        future: Future[Any] = Future()
        source, names = self._source, [self._key]

        def call() -> None:
            try:
                future.set_result(source.get_variables(names))
            except BaseException as exc:  # handed to update() through the future
                future.set_exception(exc)

        context = contextvars.copy_context()  # the node's identity, for the topo call
        threading.Thread(
            target=context.run, args=(call,), name="variable-client", daemon=True
        ).start()
        return future


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
            # The call's own failure when it is done: a DeadlineExceeded is a TimeoutError
            # too, and taken for the poll's it made this loop spin until the stop.
            if future.done() or (end is not None and time.monotonic() >= end):
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
