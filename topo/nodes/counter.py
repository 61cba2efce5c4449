"""Counter: shared step counts (``actor_steps``, ``learner_steps``, ...), as in Acme.

A program usually has one Counter node; nodes hold a handle to it and call
``counter.increment(steps=1)``. A local Counter with a ``parent`` and a
``prefix`` forwards its increments to the parent as ``<prefix>_<key>``, so an
actor counts ``steps`` and the shared counter sees ``actor_steps``.

State (``save()``/``restore()``, for snapshots): ``{"counts": {key: n}, "unsynced":
{key: n}}``. ``unsynced`` holds the increments a child had not yet forwarded to its
parent (``time_delta`` batches them); a restored child forwards them at its next sync,
so the restored parent, saved at the same point without them, ends up with every step
counted once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

Number = int | float


class Counter:
    """Thread-safe counts, optionally mirrored into a parent counter under a prefix."""

    def __init__(
        self,
        parent: Any = None,
        prefix: str = "",
        time_delta: float = 1.0,
        return_only_prefixed: bool = False,
    ) -> None:
        self._parent = parent
        self._prefix = prefix
        self._time_delta = time_delta
        self._return_only_prefixed = return_only_prefixed
        self._counts: dict[str, Number] = {}
        self._unsynced: dict[str, Number] = {}
        self._cache: dict[str, Number] = {}
        self._last_sync = float("-inf")
        self._lock = threading.Lock()

    def _prefixed(self, key: str) -> str:
        return f"{self._prefix}_{key}" if self._prefix else key

    def increment(self, **counts: Number) -> dict[str, Number]:
        """Add to the named counts; returns all counts (the parent's too, if any)."""
        with self._lock:
            for key, value in counts.items():
                self._counts[key] = self._counts.get(key, 0) + value
            if self._parent is None:
                return dict(self._counts)
            for key, value in counts.items():
                self._unsynced[key] = self._unsynced.get(key, 0) + value
            now = time.monotonic()
            if now - self._last_sync < self._time_delta:
                return self._merged()
            pending = {self._prefixed(k): v for k, v in self._unsynced.items()}
            self._unsynced = {}
            self._last_sync = now
        # Talk to the parent outside the lock: it may be a remote handle.
        self._cache = dict(self._parent.increment(**pending))
        with self._lock:
            return self._merged()

    def _merged(self) -> dict[str, Number]:
        """This counter's counts over the parent's (last seen) counts."""
        merged = dict(self._cache)
        for key, value in self._counts.items():
            merged[self._prefixed(key)] = max(merged.get(self._prefixed(key), 0), value)
        if self._return_only_prefixed and self._prefix:
            start = f"{self._prefix}_"
            return {k[len(start) :]: v for k, v in merged.items() if k.startswith(start)}
        return merged

    def get_counts(self) -> dict[str, Number]:
        """All counts now (flushing pending increments to the parent first)."""
        if self._parent is not None:
            with self._lock:
                pending = {self._prefixed(k): v for k, v in self._unsynced.items()}
                self._unsynced = {}
                self._last_sync = time.monotonic()
            self._cache = dict(self._parent.increment(**pending))
            with self._lock:
                return self._merged()
        with self._lock:
            return dict(self._counts)

    def get_steps_key(self) -> str:
        """The key this counter's ``steps`` are reported under."""
        return self._prefixed("steps")

    def save(self) -> dict[str, dict[str, Number]]:
        """A checkpointable copy: the local counts and the increments not yet forwarded
        to the parent (empty without one)."""
        with self._lock:
            return {"counts": dict(self._counts), "unsynced": dict(self._unsynced)}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Continue from a ``save()`` copy (a plain ``{key: n}`` of counts is taken too, as
        counts already known to the parent). The next increment syncs with the parent."""
        if isinstance(state, Mapping) and isinstance(state.get("counts"), Mapping):
            counts, unsynced = _numbers(state["counts"]), _numbers(state.get("unsynced") or {})
        else:
            counts, unsynced = _numbers(state), {}
        with self._lock:
            self._counts = counts
            self._unsynced = unsynced if self._parent is not None else {}
            self._cache = {}
            self._last_sync = float("-inf")


def _numbers(counts: Any) -> dict[str, Number]:
    """A copy of ``counts`` checked to be ``{name: number}`` (a counter's saved counts)."""
    if not isinstance(counts, Mapping):
        raise ValueError(
            f"a counter's state is {{'counts': {{name: number}}, 'unsynced': {{...}}}}, "
            f"got {type(counts).__name__}"
        )
    bad = [
        k
        for k, v in counts.items()
        if not isinstance(k, str) or isinstance(v, bool) or not isinstance(v, int | float)
    ]
    if bad:
        raise ValueError(f"a counter's counts are numbers by name; not so for {bad[:5]}")
    return dict(counts)
