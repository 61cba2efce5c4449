"""The launcher's side of the nodes' call figures (``topo.runtime.callstats``): rows
labelled ``RPC_LABEL`` arrive with the metric rows and are taken out before the metrics
store sees them; each node's latest figures, checked and bounded, go to ``status.json``
(``rpc`` of its entry) rather than to ``metrics/``."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from topo.runtime.callstats import MAX_KEYS, RPC_LABEL

_NUMBERS = ("rate", "mean_ms", "max_ms", "p50_ms", "p99_ms")
_COUNTS = ("calls", "errors")
_MAX_NAME = 200


def split(rows: list[Any], label: str = RPC_LABEL) -> tuple[list[Any], list[dict[str, Any]]]:
    """(the other rows, the rows labelled ``label``: topo's own, call figures by default)
    of one ``metrics`` call."""
    metrics: list[Any] = []
    taken: list[dict[str, Any]] = []
    for row in rows:
        if isinstance(row, dict) and row.get("label") == label:
            taken.append(row)
        else:
            metrics.append(row)
    return metrics, taken


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _name(value: Any) -> str | None:
    return value if isinstance(value, str) and 0 < len(value) <= _MAX_NAME else None


def _entry(raw: Any, made: bool) -> dict[str, Any] | None:
    """One checked (method, figures) entry, or None when it is not one."""
    if not isinstance(raw, dict):
        return None
    method = _name(raw.get("method"))
    peer = _name(raw.get("peer")) if made else ""
    if method is None or peer is None:
        return None
    entry: dict[str, Any] = {"method": method}
    if made:
        entry["peer"] = peer
    for key in _COUNTS:
        value = raw.get(key)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            return None
        entry[key] = value
    for key in _NUMBERS:
        value = raw.get(key)
        if value is not None and not _finite(value):
            return None
        entry[key] = value
    return entry


def checked(row: dict[str, Any], nodes: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """(node, figures) of a call-figure row, or None for a row that is not one (dropped:
    figures are best effort and never fail a run)."""
    node = row.get("node")
    stamp = row.get("time")
    if not isinstance(node, str) or node not in nodes:
        return None
    if not _finite(stamp):
        return None
    figures: dict[str, Any] = {"time": stamp}
    for direction in ("served", "made"):
        raw = row.get(direction)
        if not isinstance(raw, list):
            return None
        entries = [_entry(e, direction == "made") for e in raw[:MAX_KEYS]]
        figures[direction] = [e for e in entries if e is not None]
    figures["latency"] = _latency(row.get("latency"))
    return node, figures


def _latency(raw: Any) -> dict[str, dict[str, float | None]]:
    """Each direction's p50 and p99 over all its calls (a figure that is not a finite
    number reads None)."""
    out: dict[str, dict[str, float | None]] = {}
    for direction in ("served", "made"):
        given = raw.get(direction) if isinstance(raw, dict) else None
        given = given if isinstance(given, dict) else {}
        out[direction] = {
            key: float(given[key]) if _finite(given.get(key)) else None
            for key in ("p50_ms", "p99_ms")
        }
    return out
