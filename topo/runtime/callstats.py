"""Per-method call counters of this process's nodes: the RPC calls each node serves and
the calls it makes, with their rate and latency, for the launcher (``status.json``, the
dashboard).

Recording a call is a lock, a dict look-up, four additions and a bisect into the
interval's latency histogram (``topo.runtime.latency``; well under a microsecond against
the tens of microseconds of a call). A background thread of the process, started
by the first call recorded, sends each node's figures every ``REPORT_S`` seconds as one
row labelled ``RPC_LABEL`` through the ``topo.metrics`` sender (the registry's
authenticated ``metrics`` RPC): calls and errors in total, and over the last interval the
rate, mean, median (p50), p99 and worst latency, and each direction's p50 and p99 over
all its calls (``latency``). A node with no calls since its last row sends nothing, after
one row that says its rate fell to 0. ``TOPO_RPC_STATS=0`` in a node's environment turns
the counters off (``bench/rpc_bench.py`` measures their cost so).
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

from topo.runtime import latency, metrics
from topo.runtime.context import current_node_info

RPC_LABEL = "topo.rpc"  # the label of the rows the launcher takes as call figures
REPORT_S = 2.0
MAX_KEYS = 200  # (method) or (peer, method) pairs reported per node and direction
OFF_VARIABLE = "TOPO_RPC_STATS"  # "0": no counting (read when a node is first counted)

# [calls, errors, seconds in total, worst seconds in the interval, the interval's
# latency histogram]
Cell = list[Any]


class _Counters:
    """Every node of this process: its cells by method (served) and by (peer, method)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.served: dict[str, dict[str, Cell]] = {}
        self.made: dict[str, dict[tuple[str, str], Cell]] = {}
        self.books: dict[str, Any] = {}  # node -> the address book its rows go through
        self.programs: dict[str, str] = {}  # node -> the program it belongs to
        self.left: set[str] = set()  # programs this process left: nothing more is counted
        self.thread: threading.Thread | None = None
        self.report_lock = threading.Lock()  # one report at a time (the loop, a flush)
        self.off = _switched_off()


def _switched_off() -> bool:
    return os.environ.get(OFF_VARIABLE, "1") == "0"


_state = _Counters()


def _reset_after_fork() -> None:
    global _state
    _state = _Counters()


os.register_at_fork(after_in_child=_reset_after_fork)


def _add(cell: Cell, seconds: float, ok: bool) -> None:
    cell[0] += 1
    if not ok:
        cell[1] += 1
    cell[2] += seconds
    if seconds > cell[3]:
        cell[3] = seconds
    cell[4][latency.bucket(seconds)] += 1


def active() -> bool:
    """Whether calls are counted in this process (``TOPO_RPC_STATS=0`` turns it off)."""
    return not _state.off


def served(program: Any, node: str, method: str, seconds: float, ok: bool) -> None:
    """Node ``node`` of ``program`` (a ``ProgramContext``) answered one call of ``method``
    in ``seconds`` (``ok``: no error)."""
    state = _state
    if not state.off:
        _count(state, state.served, program, node, method, seconds, ok)


def caller() -> str:
    """The node of the calling thread ("" outside any node: the launcher, a script)."""
    info = current_node_info()
    return "" if info is None else info.id


def made(program: Any, node: str, peer: str, method: str, seconds: float, ok: bool) -> None:
    """Node ``node`` of ``program`` called ``peer.method``, which took ``seconds`` (``ok``:
    a value came back, not an error)."""
    state = _state
    if node and not state.off:
        _count(state, state.made, program, node, (peer, method), seconds, ok)


def _count(
    state: _Counters,
    table: dict[str, dict[Any, Cell]],
    program: Any,
    node: str,
    key: Any,
    seconds: float,
    ok: bool,
) -> None:
    """Add one call to ``node``'s cell ``key`` of ``table`` (at most ``MAX_KEYS`` cells a
    node: what comes after is not counted)."""
    with state.lock:
        cells = table.get(node)
        if cells is None:
            if _note(state, node, program):
                return
            cells = table[node] = {}
        cell = cells.get(key)
        if cell is None:
            if len(cells) >= MAX_KEYS:
                return
            cell = cells[key] = [0, 0, 0.0, 0.0, latency.empty()]
        _add(cell, seconds, ok)


def _note(state: _Counters, node: str, program: Any) -> bool:
    """A node seen for the first time (under the lock): where its rows go; the reporter
    starts with the first one. True when it is not to be counted: counting is off (the
    node's environment, set after the fork server forked its process, says so) or its
    program is one this process left (a thread the threads backend abandoned)."""
    state.off = _switched_off()
    program_id = str(getattr(program, "program_id", ""))
    if state.off or program_id in state.left:
        return True
    book = getattr(program, "address_book", None)
    if book is not None and hasattr(book, "metrics"):
        state.books[node] = book
        state.programs[node] = program_id
    if state.thread is None:
        state.thread = threading.Thread(
            target=_report_loop, args=(state,), name="topo-callstats", daemon=True
        )
        state.thread.start()
    return False


def _figures(cell: Cell, before: Cell | None, dt: float) -> dict[str, Any]:
    """A cell's row entry: totals; rate, worst, p50 and p99 latency over the interval;
    the mean latency over the interval (over every call when the interval had none)."""
    calls = cell[0] - (before[0] if before else 0)
    spent = cell[2] - (before[2] if before else 0.0)
    if not calls:
        calls, spent = cell[0], cell[2]
    return {
        "calls": int(cell[0]),
        "errors": int(cell[1]),
        "rate": round((cell[0] - (before[0] if before else 0)) / dt, 2) if dt > 0 else 0.0,
        "mean_ms": round(1000 * spent / calls, 3) if calls else None,
        "max_ms": round(1000 * cell[3], 3) if cell[3] else None,
        "p50_ms": _ms(latency.quantile(cell[4], 0.5, cell[3])),
        "p99_ms": _ms(latency.quantile(cell[4], 0.99, cell[3])),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(1000 * seconds, 3)


def _overall(cells: dict[Any, Cell]) -> dict[str, float | None]:
    """p50 and p99 over the interval's calls of every cell of a node and direction."""
    histogram = latency.merged(c[4] for c in cells.values())
    worst = max((c[3] for c in cells.values()), default=0.0) or None
    return {
        "p50_ms": _ms(latency.quantile(histogram, 0.5, worst)),
        "p99_ms": _ms(latency.quantile(histogram, 0.99, worst)),
    }


def _counts(cells: dict[Any, Cell]) -> dict[Any, float]:
    return {k: c[0] for k, c in cells.items()}


class Reporter:
    """Turns the counters into one row per node that had calls since its last row."""

    def __init__(self, state: _Counters) -> None:
        self.state = state
        self.last: dict[tuple[str, str], dict[Any, Cell]] = {}  # (direction, node) -> copy
        self.last_time: dict[str, float] = {}
        self.quiet: set[str] = set()  # nodes whose last row said rate 0

    def forget(self, node: str) -> None:
        """Drop what the reporter remembers of ``node`` (its server closed)."""
        for direction in ("served", "made"):
            self.last.pop((direction, node), None)
        self.last_time.pop(node, None)
        self.quiet.discard(node)

    def rows(self, now: float, only: str | None = None) -> list[tuple[Any, dict[str, Any]]]:
        """(address book, row) for every node with news (or for ``only``)."""
        state = self.state
        with state.lock:
            snap: dict[tuple[str, str], dict[Any, Cell]] = {}
            for direction, table in (("served", state.served), ("made", state.made)):
                for n, cells in table.items():  # type: ignore[attr-defined]
                    snap[(direction, n)] = {k: list(c) for k, c in cells.items()}
                    for c in cells.values():
                        c[3] = 0.0  # the worst latency and the histogram are per interval
                        c[4] = latency.empty()
            books = dict(state.books)
        out = []
        for node in sorted({n for _, n in snap}):
            if only is not None and node != only:
                continue
            book = books.get(node)
            if book is None:
                continue
            moved = any(
                _counts(snap.get((d, node), {})) != _counts(self.last.get((d, node), {}))
                for d in ("served", "made")
            )
            if not moved and node in self.quiet:
                continue
            dt = now - self.last_time.get(node, now - REPORT_S)
            row: dict[str, Any] = {"time": time.time(), "node": node, "label": RPC_LABEL}
            row["latency"] = {}
            for direction in ("served", "made"):
                cells = snap.get((direction, node), {})
                row["latency"][direction] = _overall(cells)
                before = self.last.get((direction, node), {})
                entries = []
                for key, cell in cells.items():
                    peer, method = key if isinstance(key, tuple) else ("", key)
                    entry = {"method": method, **_figures(cell, before.get(key), dt)}
                    if direction == "made":
                        entry["peer"] = peer
                    entries.append(entry)
                row[direction] = entries
                self.last[(direction, node)] = cells
            self.last_time[node] = now
            if moved:
                self.quiet.discard(node)
            else:
                self.quiet.add(node)
            out.append((book, row))
        return out


_reporters: dict[int, Reporter] = {}


def _report(state: _Counters, only: str | None = None) -> None:
    """Queue the rows of every node with news (or of ``only``) for the metrics sender
    (under the state's report lock)."""
    reporter = _reporters.get(id(state))
    if reporter is None:
        reporter = _reporters[id(state)] = Reporter(state)
    try:
        for book, row in reporter.rows(time.monotonic(), only):
            metrics.ship(book, row)
    except Exception:  # figures are best effort: never break the node
        pass


def _report_loop(state: _Counters) -> None:
    while state is _state:  # a forked child starts its own
        time.sleep(REPORT_S)
        with state.report_lock:
            _report(state)


def forget(node: str) -> None:
    """``node``'s server closed (its end, or a kill): drop its figures unsent (the
    worker reports a node's last figures itself, with ``finish``, before closing it)."""
    state = _state
    if state.thread is None:
        return
    with state.report_lock:
        _forget(state, [node])


def finish(node: str) -> None:
    """``node`` ended (its server closed, its run returned): queue its last figures and
    forget it, so a process that runs many programs (the threads backend, a test
    session) keeps nothing of the old ones; the caller then flushes ``topo.metrics``."""
    state = _state
    if state.thread is None:
        return
    with state.report_lock:
        _report(state, node)
        _forget(state, [node])


def _forget(state: _Counters, nodes: list[str]) -> None:
    """Drop ``nodes`` (under the report lock)."""
    with state.lock:
        for node in nodes:
            state.served.pop(node, None)
            state.made.pop(node, None)
            state.books.pop(node, None)
            state.programs.pop(node, None)
    reporter = _reporters.get(id(state))
    if reporter is not None:
        for node in nodes:
            reporter.forget(node)


def program_left(program_id: str) -> None:
    """This process left ``program_id`` (``topo.runtime.client``): its nodes' figures are
    dropped unsent (its launcher is gone or going) and nothing more is counted for it."""
    state = _state
    with state.report_lock:
        with state.lock:
            nodes = [n for n, p in state.programs.items() if p == program_id]
            books = {id(state.books[n]) for n in nodes if n in state.books}
            state.left.add(program_id)
            if len(state.left) > 1000:
                state.left.pop()
        _forget(state, nodes)
    if books:  # rows still queued for it would hold the sender up until they time out
        metrics.discard(books, RPC_LABEL)
