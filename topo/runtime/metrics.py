"""Metrics for node code: Acme-style loggers that write dicts of scalars.

``log = topo.metrics.logger("actor")`` then ``log.write({"episode_return": 200.0})``.
Each row is stamped with the wall time, the node id and the label, buffered, and sent
to the launcher over the registry's authenticated ``metrics`` RPC by one background
thread per process (at most every ``FLUSH_S`` seconds, and at ``close``/exit), so a
hot loop never waits on the network. The launcher keeps one JSON-lines file per node
in the run directory and shows each node's latest figures. Outside a topo program the
rows stay in memory (``rows``), so node code runs unchanged in a plain script.
"""

from __future__ import annotations

import atexit
import logging
import math
import numbers
import threading
import time
from collections.abc import Mapping
from typing import Any

from topo.runtime.context import current_node_info, maybe_current_program

log = logging.getLogger("topo.runtime.metrics")
FLUSH_S = 0.5
MAX_PENDING = 10_000  # rows kept while the launcher cannot be reached; older ones are dropped
MAX_STR = 1000  # characters of a string value (metrics are figures, not logs)
BATCH_ROWS = 500  # rows per call, below the registry's cap of 1000
BATCH_BYTES = 256 * 1024  # rough payload size per call, well below the registry's 1 MiB frame
RESERVED = frozenset({"time", "node", "label"})  # stamped on every row by the logger
Scalar = int | float | str | bool | None


def scalar(key: str, value: Any) -> Scalar:
    """``value`` as a JSON scalar (numpy and JAX scalars included), or TypeError
    (ValueError for a string longer than ``MAX_STR``)."""
    if isinstance(value, str) and len(value) > MAX_STR:
        raise ValueError(f"metric {key!r} is a string of {len(value)} characters (max {MAX_STR})")
    if value is None or isinstance(value, bool | str | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return scalar(key, float(value))
    size = getattr(value, "size", None)
    if size == 1 and hasattr(value, "item"):  # 0-d or one-element numpy / JAX array
        return scalar(key, value.item())
    raise TypeError(
        f"metric {key!r} must be a number, bool, string or None, got {type(value).__name__}"
    )


def _size(row: dict[str, Any]) -> int:
    """A rough upper bound of a row's pickled size."""
    return sum(len(k) + (len(v) if isinstance(v, str) else 8) + 16 for k, v in row.items())


def batches(rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """``rows`` cut into calls of at most ``BATCH_ROWS`` rows and about ``BATCH_BYTES``."""
    out: list[list[dict[str, Any]]] = []
    size = 0
    for row in rows:
        n = _size(row)
        if not out or len(out[-1]) >= BATCH_ROWS or size + n > BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(row)
        size += n
    return out


class _Shipper:
    """The process's one background sender of metric rows to the launchers.

    Rows wait per address book (one per program the process takes part in) and each book
    is sent under a lock of its own: a program whose launcher is gone or slow holds up
    only its own rows, never a node of another program flushing its last ones as it
    ends (the threads backend runs many programs, one after another, in one process).
    The rows of a program the process has left are dropped, queued or not."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pending: dict[int, tuple[Any, list[dict[str, Any]]]] = {}  # id(book) ->
        self._send_locks: dict[int, threading.Lock] = {}  # one sender per book: in order
        self._left: dict[str, None] = {}  # programs left (oldest first, bounded)
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._warned = False

    def put(self, book: Any, row: dict[str, Any]) -> None:
        with self._lock:
            if _program_of(book) in self._left:
                return
            queued = self._pending.setdefault(id(book), (book, []))[1]
            queued.append(row)
            if len(queued) > MAX_PENDING:
                del queued[: len(queued) - MAX_PENDING]
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="topo-metrics", daemon=True)
                self._thread.start()

    def discard(self, books: set[int], label: str) -> None:
        """Drop the queued rows labelled ``label`` bound for the address books ``books``
        (by ``id``): their program is gone."""
        with self._lock:
            for key in books & self._pending.keys():
                book, rows = self._pending[key]
                self._pending[key] = (book, [r for r in rows if r.get("label") != label])

    def left(self, program_id: str) -> None:
        """This process left ``program_id``: its rows, now and later, have no launcher."""
        with self._lock:
            self._left[program_id] = None
            if len(self._left) > 1000:
                del self._left[next(iter(self._left))]
            for key in [k for k, (b, _) in self._pending.items() if _program_of(b) == program_id]:
                del self._pending[key]
                self._send_locks.pop(key, None)

    def joined(self, program_id: str) -> None:
        """This process takes part in ``program_id`` (again): its rows go out."""
        with self._lock:
            self._left.pop(program_id, None)

    def _loop(self) -> None:
        while True:
            self._wake.wait(FLUSH_S)
            self._wake.clear()
            self.flush()

    def flush(self, book: Any = None) -> None:
        """Send what is buffered now for ``book`` (None: for every program this process
        takes part in); returns once those rows (and a send of the same book already
        under way) reached the launcher or failed."""
        with self._lock:
            keys = list(self._pending) if book is None else [id(book)]
            locks = [(k, self._send_locks.setdefault(k, threading.Lock())) for k in keys]
        for key, send_lock in locks:
            with send_lock:
                with self._lock:
                    target, rows = self._pending.pop(key, (None, []))
                if target is not None and rows:
                    self._send(target, rows)

    def _send(self, book: Any, rows: list[dict[str, Any]]) -> None:
        try:
            for part in batches(rows):
                book.metrics(part)
        except Exception as exc:  # the launcher is gone or busy: best effort
            if not self._warned:
                self._warned = True
                log.warning("topo: metrics not delivered (%r); later failures quiet", exc)


def _program_of(book: Any) -> str | None:
    """The program an address book belongs to (a registry client's; None: not known)."""
    info = getattr(book, "info", None)
    return getattr(info, "program_id", None)


_shipper = _Shipper()
atexit.register(_shipper.flush)


def ship(book: Any, row: dict[str, Any]) -> None:
    """Send ``row`` to the launcher through ``book`` with this process's metric rows
    (``topo.runtime.callstats`` sends its call figures so)."""
    _shipper.put(book, row)


def discard(books: set[int], label: str) -> None:
    """Drop queued rows labelled ``label`` for the address books ``books`` (by ``id``)."""
    _shipper.discard(books, label)


def program_left(program_id: str) -> None:
    """This process left ``program_id`` (``topo.runtime.client``): its rows are dropped."""
    _shipper.left(program_id)


def program_joined(program_id: str) -> None:
    """This process takes part in ``program_id`` (``topo.runtime.client``), maybe again."""
    _shipper.joined(program_id)


def flush(book: Any = None) -> None:
    """Send the buffered rows bound for ``book`` now (None: every row of this process);
    the worker calls it when a node ends, since a node's process leaves with
    ``os._exit``, which skips ``atexit``."""
    _shipper.flush(book)


class MetricsLogger:
    """Writes rows of scalars for the calling node (Acme's ``Logger.write``)."""

    def __init__(self, label: str = "", every_s: float = 0.0) -> None:
        self.label = label
        self.every_s = every_s
        self.rows: list[dict[str, Any]] = []  # kept only outside a topo program
        self._last = float("-inf")

    def write(self, values: Mapping[str, Any]) -> None:
        """Record ``values`` (numbers, bools, strings); rows closer than ``every_s``
        seconds to the previous one are skipped, like Acme's time-filtered loggers."""
        now = time.time()
        if now - self._last < self.every_s:
            return
        reserved = RESERVED.intersection(values)
        if reserved:
            raise ValueError(f"metric keys {sorted(reserved)} are reserved (topo stamps them)")
        scalars = {str(k): scalar(str(k), v) for k, v in values.items()}
        self._last = now
        row: dict[str, Any] = {"time": now}
        node = current_node_info()
        if node is not None:
            row["node"] = node.id
        if self.label:
            row["label"] = self.label
        row.update(scalars)
        program = maybe_current_program()
        book = None if program is None else program.address_book
        if node is None or book is None or not hasattr(book, "metrics"):
            self.rows.append(row)
            return
        _shipper.put(book, row)

    def close(self) -> None:
        """Send what is buffered now for this node's program (nodes need not call this:
        it also runs as the node ends)."""
        program = maybe_current_program()
        _shipper.flush(None if program is None else program.address_book)


def logger(label: str = "", every_s: float = 0.0) -> MetricsLogger:
    """A metrics logger for the calling node; see the module docstring."""
    return MetricsLogger(label, every_s)
