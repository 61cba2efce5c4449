"""Cacher: fresh replies from cache, background refresh, blocking when stale."""

from __future__ import annotations

import threading
from typing import Any

from topo.nodes import Cacher


class Source:
    """A variable source whose replies change on every call."""

    def __init__(self) -> None:
        self.calls = 0
        self.release = threading.Event()
        self.release.set()

    def get_variables(self, names: tuple[str, ...] = ()) -> dict[str, Any]:
        self.release.wait(10)
        self.calls += 1
        return {"version": self.calls, "names": list(names)}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_fresh_reply_is_served_from_cache() -> None:
    src, clock = Source(), Clock()
    cache = Cacher(src, refresh_ms=2000, stale_ms=4000, clock=clock)
    assert cache.get_variables(("w",))["version"] == 1
    clock.now = 1.0
    assert cache.get_variables(("w",))["version"] == 1
    assert src.calls == 1


def test_arguments_are_part_of_the_key() -> None:
    src = Source()
    cache = Cacher(src, refresh_ms=2000, clock=Clock())
    cache.get_variables(("a",))
    cache.get_variables(("b",))
    assert src.calls == 2


def test_old_reply_served_while_refreshing_in_background() -> None:
    src, clock = Source(), Clock()
    cache = Cacher(src, refresh_ms=2000, stale_ms=4000, clock=clock)
    cache.get_variables()
    src.release.clear()  # the refresh will block until released
    clock.now = 3.0
    assert cache.get_variables()["version"] == 1  # not stale: old value, refresh started
    src.release.set()
    cache._pool.shutdown(wait=True)
    assert src.calls == 2
    assert cache.get_variables()["version"] == 2


def test_stale_reply_makes_caller_wait_for_source() -> None:
    src, clock = Source(), Clock()
    cache = Cacher(src, refresh_ms=2000, stale_ms=4000, clock=clock)
    cache.get_variables()
    clock.now = 5.0
    assert cache.get_variables()["version"] == 2
    assert src.calls == 2


def test_unhashable_arguments_such_as_lists_are_cached() -> None:
    src = Source()
    cache = Cacher(src, refresh_ms=2000, clock=Clock())
    assert cache.get_variables(["policy", "critic"])["version"] == 1
    assert cache.get_variables(["policy", "critic"])["version"] == 1
    assert cache.get_variables(["policy"])["version"] == 2
    assert cache.call("get_variables", names=["policy"])["version"] == 3
