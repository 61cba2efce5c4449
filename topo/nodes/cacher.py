"""Cacher: a node that answers from a cache of another node's replies.

Mava and early Launchpad put caches between a trainer and many executors so
that variable requests do not all reach the trainer. A reply younger than
``refresh_ms`` is served as is; an older one is served while a refresh runs in
the background; one older than ``stale_ms`` makes the caller wait for the
refresh. Cached per (method, arguments).

A cacher has no state to snapshot (no ``save``/``restore``, so topo saves nothing for
it): its entries are copies of its source's replies, and a resumed or restarted cacher
asks its source again (the source, restored, answers what was snapshotted).
"""

from __future__ import annotations

import pickle
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

Key = tuple[str, tuple[Any, ...], tuple[tuple[str, Any], ...]]


def _frozen(value: Any) -> Any:
    """A hashable stand-in for an argument (Acme passes lists of variable names)."""
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _frozen(v)) for k, v in value.items()))
    if isinstance(value, set | frozenset):
        return frozenset(_frozen(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return ("pickled", pickle.dumps(value, protocol=5))
    return value


class _Entry:
    __slots__ = ("refreshing", "time", "value")

    def __init__(self, value: Any, at: float) -> None:
        self.value = value
        self.time = at
        self.refreshing: Future[Any] | None = None


class Cacher:
    """Caches ``source``'s replies; serves ``get_variables`` and any method via ``call``."""

    def __init__(
        self,
        source: Any,
        refresh_ms: int = 1000,
        stale_ms: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._refresh_s = refresh_ms / 1000.0
        self._stale_s = None if stale_ms is None else stale_ms / 1000.0
        self._clock = clock
        self._entries: dict[Key, _Entry] = {}
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="cacher-refresh")
        self.source_calls = 0

    def _fetch(self, key: Key, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        self.source_calls += 1
        value = getattr(self._source, key[0])(*args, **kwargs)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self._entries[key] = _Entry(value, self._clock())
            else:
                entry.value, entry.time, entry.refreshing = value, self._clock(), None
        return value

    def call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``source.method(*args, **kwargs)``, answered from the cache when fresh enough."""
        key: Key = (method, _frozen(args), _frozen(kwargs))
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None:
                age = self._clock() - entry.time
                if age < self._refresh_s:
                    return entry.value
                if self._stale_s is None or age < self._stale_s:
                    if entry.refreshing is None:
                        entry.refreshing = self._pool.submit(self._fetch, key, args, kwargs)
                    return entry.value
                pending = entry.refreshing
            else:
                pending = None
        if pending is not None:
            return pending.result()
        return self._fetch(key, args, kwargs)

    def get_variables(self, *args: Any, **kwargs: Any) -> Any:
        """The variable-source call of Acme and Mava, cached."""
        return self.call("get_variables", *args, **kwargs)
