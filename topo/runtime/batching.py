"""``@topo.batched``: concurrent calls to one method are stacked into one call.

The server hands a batched call to the method's ``Batcher`` and goes back to
serving; the batcher's own thread waits for up to ``batch_size`` calls (or
``timeout_ms`` after the first), stacks their arguments along a new leading
axis, calls the method once and splits the result back per caller. No pool
thread ever blocks waiting for a batch to fill, so a pool smaller than the
batch cannot deadlock (Launchpad's ``batched_handler`` can).
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

log = logging.getLogger("topo.runtime.batching")
F = TypeVar("F", bound=Callable[..., Any])
ATTR = "__topo_batched__"


@dataclass(frozen=True)
class BatchSpec:
    """How a method is batched."""

    batch_size: int
    timeout_ms: float
    pad: bool = False  # a short batch is filled up with copies of its first call


def batched(batch_size: int = 32, timeout_ms: float = 5.0, pad: bool = False) -> Callable[[F], F]:
    """Mark a node method as batched: it receives stacked arguments, returns stacked results.
    ``pad``: every batch has ``batch_size`` rows (a batch cut short by the timeout is
    filled with copies of its first call, whose extra results are dropped), so a jitted
    method sees one shape."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    if timeout_ms < 0:
        raise ValueError("timeout_ms must be >= 0")

    def mark(fn: F) -> F:
        spec = BatchSpec(int(batch_size), float(timeout_ms), bool(pad))
        try:
            setattr(fn, ATTR, spec)
            return fn
        except AttributeError:  # a bound method, as Launchpad's examples decorate in __init__:
            pass  # ``self.compute = lp.batched_handler(...)(self.compute)``

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

        setattr(call, ATTR, spec)
        return call  # type: ignore[return-value]

    return mark


def batch_spec(fn: Any) -> BatchSpec | None:
    """The ``BatchSpec`` of a (bound) method, if it was decorated with ``batched``."""
    spec = getattr(getattr(fn, "__func__", fn), ATTR, None)
    return spec if isinstance(spec, BatchSpec) else None


def stack(items: list[Any]) -> Any:
    """Stack same-shaped pytrees along a new leading axis (arrays/numbers -> ndarray)."""
    import numpy as np  # here, not at the top: the launcher imports this module, never stacks

    first = items[0]
    if isinstance(first, dict):
        return {k: stack([it[k] for it in items]) for k in first}
    if isinstance(first, tuple | list):
        out = [stack([it[i] for it in items]) for i in range(len(first))]
        if isinstance(first, list):
            return type(first)(out)
        return type(first)(*out) if hasattr(first, "_fields") else tuple(out)  # namedtuple
    if isinstance(first, np.ndarray | np.generic | int | float | bool | complex) or hasattr(
        first, "__array__"
    ):
        return np.stack([np.asarray(it) for it in items])
    return list(items)


def unstack(tree: Any, n: int) -> list[Any]:
    """Split a stacked pytree back into ``n`` per-call pytrees."""
    if isinstance(tree, dict):
        parts = {k: unstack(v, n) for k, v in tree.items()}
        return [{k: parts[k][i] for k in tree} for i in range(n)]
    if isinstance(tree, tuple):
        cols = [unstack(v, n) for v in tree]
        if hasattr(tree, "_fields"):  # a namedtuple stays one
            return [type(tree)(*(c[i] for c in cols)) for i in range(n)]
        return [tuple(c[i] for c in cols) for i in range(n)]
    if isinstance(tree, list) and len(tree) != n:
        cols = [unstack(v, n) for v in tree]
        return [[c[i] for c in cols] for i in range(n)]
    if len(tree) != n:
        raise ValueError(f"batched result has leading size {len(tree)}, expected {n}")
    return [tree[i] for i in range(n)]


Reply = Callable[[Any, bool, Any], None]  # (token, ok, value or exception)


class Batcher:
    """Collects calls to one batched method and runs them in batches on its own thread."""

    def __init__(
        self,
        fn: Callable[..., Any],
        spec: BatchSpec,
        reply: Reply,
        name: str,
        init: Callable[[], None] | None = None,
    ) -> None:
        self._fn = fn
        self._spec = spec
        self._reply = reply
        self._queue: queue.SimpleQueue[tuple[Any, tuple[Any, ...], dict[str, Any]] | None] = (
            queue.SimpleQueue()
        )
        self._init = init
        self._thread = threading.Thread(target=self._loop, name=f"topo-batch-{name}", daemon=True)
        self._thread.start()

    def submit(self, token: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        """Queue one call; its reply is delivered later through ``reply``."""
        self._queue.put((token, args, kwargs))

    def close(self) -> None:
        """Stop the batching thread (pending calls are dropped)."""
        self._queue.put(None)
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        if self._init is not None:
            self._init()
        while True:
            first = self._queue.get()
            if first is None:
                return
            calls = [first]
            end = time.monotonic() + self._spec.timeout_ms / 1000.0
            closing = False
            while len(calls) < self._spec.batch_size:
                remaining = end - time.monotonic()
                try:
                    item = (
                        self._queue.get(timeout=remaining)
                        if remaining > 0
                        else self._queue.get_nowait()
                    )
                except queue.Empty:
                    break
                if item is None:
                    closing = True
                    break
                calls.append(item)
            groups: dict[tuple[int, tuple[str, ...]], list[Any]] = {}
            for call in calls:
                groups.setdefault((len(call[1]), tuple(sorted(call[2]))), []).append(call)
            for group in groups.values():
                self._run(group)
            if closing:
                return

    def _run(self, calls: list[tuple[Any, tuple[Any, ...], dict[str, Any]]]) -> None:
        n = len(calls)
        rows = calls + [calls[0]] * (self._spec.batch_size - n if self._spec.pad else 0)
        try:
            args = tuple(stack([c[1][i] for c in rows]) for i in range(len(rows[0][1])))
            kwargs = {k: stack([c[2][k] for c in rows]) for k in rows[0][2]}
            results = unstack(self._fn(*args, **kwargs), len(rows))[:n]
        except BaseException as exc:
            for token, _, _ in calls:
                self._reply(token, False, exc)
            return
        for (token, _, _), result in zip(calls, results, strict=True):
            self._reply(token, True, result)
