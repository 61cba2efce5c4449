"""The output a run's nodes wrote, from their log files: what ``topo logs`` prints before
it follows. Lines of several nodes are interleaved by their timestamps; a line without
one (written below Python) keeps the time of the line before it in its file."""

from __future__ import annotations

import heapq
import re
import time
from collections import deque
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}) ")
MARKER = "── topo: "
_SPAN = re.compile(r"^(\d+(?:\.\d+)?)\s*(s|m|h|d)$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class BadSince(ValueError):
    """``--since`` is neither a duration nor a time."""


def parse_since(text: str, now: float | None = None) -> float:
    """``--since``: a duration back from now (``90s``, ``10m``, ``2h``, ``1d``) or a local
    time (``2026-12-01T22:00``, ``2026-12-01 22:00:05``) -> seconds since the epoch."""
    span = _SPAN.match(text.strip())
    if span:
        return (now or time.time()) - float(span.group(1)) * _UNIT[span.group(2)]
    try:
        return datetime.fromisoformat(text.strip()).timestamp()
    except ValueError:
        raise BadSince(
            f"--since {text!r}: give a duration (30s, 10m, 2h, 1d) or a time (2026-12-01T22:00)"
        ) from None


def node_files(log: Path) -> list[Path]:
    """A node's log and what rotation moved away, oldest first (``.log.3`` ... ``.log``)."""
    rotated = []
    for path in log.parent.glob(log.name + ".*"):
        suffix = path.name[len(log.name) + 1 :]
        if suffix.isdigit():
            rotated.append((int(suffix), path))
    return [p for _, p in sorted(rotated, reverse=True)] + [log]


def _lines(label: str, log: Path, since: float | None) -> Iterator[tuple[float, str, str]]:
    """``(time, label, line as written)`` for every line of one node's files."""
    when = 0.0
    for path in node_files(log):
        try:
            f = open(path, encoding="utf-8", errors="replace")
        except OSError:
            continue
        with f:
            for raw in f:
                line = raw.rstrip("\n").rstrip("\r")
                stamp = STAMP.match(line)
                if stamp:
                    try:
                        when = datetime.fromisoformat(stamp.group(1)).timestamp()
                    except ValueError:
                        pass
                    if line[stamp.end() :].startswith(MARKER):
                        continue
                if since is not None and when < since:
                    continue
                yield when, label, line


def history(
    logs: dict[str, Path], tail: int | None = None, since: float | None = None
) -> Iterator[tuple[str, str]]:
    """``(label, line)`` of every node in ``logs`` (label -> log file), interleaved in time;
    only the last ``tail`` lines of each node and lines from ``since`` on, when given."""
    streams = []
    for label, log in logs.items():
        lines = _lines(label, log, since)
        if tail is not None:
            lines = iter(deque(lines, maxlen=tail))
        streams.append(lines)
    for _, label, line in heapq.merge(*streams, key=lambda t: t[0]):
        yield label, line


def bare(line: str) -> str:
    """A line without its timestamp."""
    return STAMP.sub("", line, count=1)
