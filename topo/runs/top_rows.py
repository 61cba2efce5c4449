"""The rows of ``topo top``: per node, its process's CPU and memory, the calls it serves
and makes per second, the p50 and p99 latency of the calls it serves (of those it makes,
for a node that serves none), and the rate of its leading metric; a group of several replicas as one row unless expanded.

Reads only what ``status.json`` holds (the nodes' call figures, ``rpc``; their latest
metric rows) and what ``figures`` gives for a node's process (CPU and memory, read by
pid where the process is on this machine). A metric already a rate (``*_per_s``, ``sps``,
``fps``) is shown as it is; otherwise the rate of the leading counter is taken over the
looks of the last seconds (``Sampler``)."""

from __future__ import annotations

import statistics
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from topo.runs.figures import STAMPS, rank_keys

SORTS = ("cpu", "mem", "in", "out", "p50", "p99", "rate", "name")
RATE_MARKS = ("_per_s", "per_sec", "sps", "fps")
COUNTER_ENDS = ("steps", "episodes", "frames", "updates", "_step")  # counts that grow
Figures = Callable[[Mapping[str, Any]], Mapping[str, Any]]  # node entry -> cpu, rss, where


@dataclass(frozen=True)
class Row:
    """One line of the table: a node, or a group of ``count`` replicas."""

    name: str
    group: str
    state: str
    cpu: float | None = None  # percent of one core
    mem: int | None = None  # bytes (RSS)
    calls_in: float | None = None  # calls served per second
    calls_out: float | None = None  # calls made per second
    p50_ms: float | None = None  # of the calls served (a node serving none: made)
    p99_ms: float | None = None
    rate: float | None = None
    rate_name: str = ""
    where: str = "local"  # local, remote (another host), shared (one process), gone


class Sampler:
    """Rates of counters over the looks of the last ``WINDOW_S`` seconds at a node (its
    figures change as its rows come, every few seconds: one look to the next would jump
    between 0 and twice the rate)."""

    WINDOW_S = 10.0

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], deque[tuple[float, float]]] = {}

    def rate(self, node: str, key: str, value: float, at: float) -> float | None:
        """The rate of counter ``key`` of ``node``, now ``value`` at time ``at``; None
        until looks a second apart saw it (or after it went back: a restart)."""
        seen = self._seen.setdefault((node, key), deque())
        if seen and value < seen[-1][1]:
            seen.clear()
        seen.append((at, value))
        while len(seen) > 2 and at - seen[1][0] >= self.WINDOW_S:
            seen.popleft()
        first_at, first = seen[0]
        if at - first_at < 1.0:
            return None
        return (value - first) / (at - first_at)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def leading_rate(
    node: str, metrics: Mapping[str, Any], sampler: Sampler, now: float
) -> tuple[str, float | None]:
    """(name, value) of the node's leading rate: a metric that is one, else the rate of
    its leading counter (a step or episode count) over the last looks (``now``: this
    look's time). ``metrics``: the node's latest figures, as ``status.json`` has them."""
    numbers = {
        k: n for k, v in metrics.items() if k not in STAMPS and (n := _number(v)) is not None
    }
    ranked = rank_keys(list(numbers))
    for key in ranked:
        if any(mark in key.lower() for mark in RATE_MARKS):
            return key, numbers[key]
    for key in ranked:
        if key.lower().endswith(COUNTER_ENDS):
            return f"{key}/s", sampler.rate(node, key, numbers[key], now)
    return "", None


def _sum(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def node_row(
    entry: Mapping[str, Any], process: Mapping[str, Any], sampler: Sampler, now: float
) -> Row:
    """The row of one node's ``status.json`` entry and its process's figures, looked at
    ``now`` (monotonic seconds)."""
    rpc = _mapping(entry.get("rpc"))
    served = [e for e in rpc.get("served", []) if isinstance(e, Mapping)]
    made = [e for e in rpc.get("made", []) if isinstance(e, Mapping)]
    # the latency of the calls it serves; a node that serves none, of those it makes
    latencies = _mapping(rpc.get("latency"))
    overall = _mapping(latencies.get("served"))
    if overall.get("p50_ms") is None:
        overall = _mapping(latencies.get("made"))
    metrics = _mapping(entry.get("metrics"))
    rate_name, rate = leading_rate(str(entry.get("id")), metrics, sampler, now)
    where = str(process.get("where", "gone"))
    if process.get("shared"):
        where = "shared"
    local = where == "local"
    rss = process.get("rss")
    return Row(
        name=str(entry.get("id")),
        group=str(entry.get("group") or entry.get("id")),
        state=str(entry.get("state", "?")),
        cpu=_number(process.get("cpu_percent")) if local else None,
        mem=int(rss) if local and isinstance(rss, int) else None,
        calls_in=_sum([_number(e.get("rate")) for e in served]) if rpc else None,
        calls_out=_sum([_number(e.get("rate")) for e in made]) if rpc else None,
        p50_ms=_number(overall.get("p50_ms")),
        p99_ms=_number(overall.get("p99_ms")),
        rate=rate,
        rate_name=rate_name,
        where=where,
    )


def group_row(group: str, members: list[Row]) -> Row:
    """One row for the replicas of ``group``: sums of CPU, memory, calls and rates, the
    median of their p50s and the worst of their p99s, the state most of them are in."""
    states: dict[str, int] = {}
    for m in members:
        states[m.state] = states.get(m.state, 0) + 1
    common = max(states, key=lambda s: states[s])
    state = common if len(states) == 1 else f"{common} {states[common]}/{len(members)}"
    p50s = [m.p50_ms for m in members if m.p50_ms is not None]
    p99s = [m.p99_ms for m in members if m.p99_ms is not None]
    mems = [m.mem for m in members if m.mem is not None]
    wheres = {m.where for m in members}
    return Row(
        name=f"{group} ×{len(members)}",
        group=group,
        state=state,
        cpu=_sum([m.cpu for m in members]),
        mem=sum(mems) if mems else None,
        calls_in=_sum([m.calls_in for m in members]),
        calls_out=_sum([m.calls_out for m in members]),
        p50_ms=statistics.median(p50s) if p50s else None,
        p99_ms=max(p99s) if p99s else None,
        rate=_sum([m.rate for m in members]),
        rate_name=next((m.rate_name for m in members if m.rate_name), ""),
        where=wheres.pop() if len(wheres) == 1 else "local",
    )


def _key(sort: str) -> Callable[[Row], Any]:
    if sort == "name":
        return lambda r: r.name
    field = {"mem": "mem", "in": "calls_in", "out": "calls_out"}.get(sort, sort)
    field = {"p50": "p50_ms", "p99": "p99_ms"}.get(field, field)
    return lambda r: -(getattr(r, field) or 0.0)


def table_rows(
    nodes: list[Mapping[str, Any]],
    figures: Figures,
    sampler: Sampler,
    sort: str = "cpu",
    expand: frozenset[str] = frozenset(),
    now: float | None = None,
) -> list[tuple[Row, bool]]:
    """(row, is a member shown under its group) for every node of ``nodes`` (the entries
    of ``status.json``), groups of several replicas folded unless named in ``expand``
    (``*``: every group), sorted by ``sort`` (one of ``SORTS``; names ascending, the
    figures descending, members within their group)."""
    at = time.monotonic() if now is None else now
    by_group: dict[str, list[Row]] = {}
    for entry in nodes:
        row = node_row(entry, figures(entry), sampler, at)
        by_group.setdefault(row.group, []).append(row)
    key = _key(sort)
    items: list[tuple[Row, list[Row]]] = []
    for group, members in by_group.items():
        if len(members) == 1:
            items.append((replace(members[0], group=group), []))
        else:
            shown = sorted(members, key=key) if "*" in expand or group in expand else []
            items.append((group_row(group, members), shown))
    out: list[tuple[Row, bool]] = []
    for row, members in sorted(items, key=lambda item: key(item[0])):
        out.append((row, False))
        out.extend((m, True) for m in members)
    return out
