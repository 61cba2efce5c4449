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

from topo.rundir.layout import with_rotated
from topo.rundir.lines import MARKER, STAMP

_SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*(s|m|h|d)")
_SPANS = re.compile(r"^(?:\d+(?:\.\d+)?\s*(?:s|m|h|d)\s*)+$")
_EPOCH = re.compile(r"^\d+(?:\.\d+)?$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class BadSince(ValueError):
    """``--since`` (or ``--until``) is neither a duration nor a time."""


def parse_time(text: str, option: str = "--since", now: float | None = None) -> float:
    """A time as ``--since`` and ``--until`` take it, as ``docker logs`` does: a duration
    back from now (``90s``, ``10m``, ``1h30m``, ``1d``), a local time
    (``2026-12-01T22:00``, ``2026-12-01 22:00:05``; with ``Z`` or ``+01:00``: that zone's)
    or seconds since the epoch -> seconds since the epoch."""
    given = text.strip()
    if _SPANS.match(given):
        back = sum(float(n) * _UNIT[unit] for n, unit in _SPAN.findall(given))
        return (now or time.time()) - back
    if _EPOCH.match(given):
        return float(given)
    try:
        return datetime.fromisoformat(given.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise BadSince(
            f"{option} {text!r}: give a duration (30s, 10m, 1h30m, 1d), a time "
            "(2026-12-01T22:00) or seconds since the epoch"
        ) from None


def parse_since(text: str, now: float | None = None) -> float:
    """``--since``: see ``parse_time``."""
    return parse_time(text, "--since", now)


def _lines(
    label: str, log: Path, since: float | None, until: float | None
) -> Iterator[tuple[float, str, str]]:
    """``(time, label, line as written)`` for every line of one node's files (from
    ``since``, before ``until``)."""
    when = 0.0
    for path in with_rotated(log):
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
                if until is not None and when >= until:
                    continue
                yield when, label, line


def history(
    logs: dict[str, Path],
    tail: int | None = None,
    since: float | None = None,
    until: float | None = None,
) -> Iterator[tuple[str, str]]:
    """``(label, line)`` of every node in ``logs`` (label -> log file), interleaved in time;
    only the last ``tail`` lines of each node, lines from ``since`` on and lines before
    ``until``, when given."""
    streams = []
    for label, log in logs.items():
        lines = _lines(label, log, since, until)
        if tail is not None:
            lines = iter(deque(lines, maxlen=tail))
        streams.append(lines)
    for _, label, line in heapq.merge(*streams, key=lambda t: t[0]):
        yield label, line

