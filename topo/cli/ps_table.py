"""``topo ps``'s rows: which runs ``--filter KEY=VALUE`` keeps, and the table fitted to
the terminal (piped: whole rows). Plain strings only: ``topo ps`` imports no rich."""

from __future__ import annotations

from collections.abc import Sequence

from topo.runs.probe import LIVE_STATES, RunInfo

FILTER_KEYS = {
    "id": "an id prefix",
    "name": "a part of the program's name",
    "backend": "procs, threads, ssh, ray ...",
    "state": "running, starting, stopping, ended, lost (or live: any of the first three)",
    "exit": "an exit code (ended runs)",
}
STATES = (*LIVE_STATES, "ended", "lost", "unknown", "live")


class BadFilter(ValueError):
    """A ``--filter`` that is not ``KEY=VALUE`` with a known key and value."""


def parse_filters(given: Sequence[str]) -> dict[str, list[str]]:
    """``["state=lost", "name=acme"]`` -> ``{"state": ["lost"], "name": ["acme"]}``."""
    out: dict[str, list[str]] = {}
    keys = ", ".join(FILTER_KEYS)
    for text in given:
        key, sep, value = text.partition("=")
        key = key.strip().lower()
        if not sep or not value:
            raise BadFilter(f"--filter {text!r}: give KEY=VALUE (keys: {keys})")
        if key not in FILTER_KEYS:
            raise BadFilter(f"--filter {text!r}: no key {key!r} (keys: {keys})")
        if key == "state" and value not in STATES:
            raise BadFilter(f"--filter {text!r}: a state is one of {', '.join(STATES)}")
        if key == "exit" and not value.lstrip("-").isdigit():
            raise BadFilter(f"--filter {text!r}: an exit code is a number")
        out.setdefault(key, []).append(value)
    return out


def _matches(info: RunInfo, key: str, value: str) -> bool:
    if key == "id":
        return info.id.startswith(value)
    if key == "name":
        return value in info.name
    if key == "backend":
        return info.backend == value
    if key == "state":
        return info.live if value == "live" else info.state == value
    return info.state == "ended" and info.exit_code == int(value)


def keep(info: RunInfo, filters: dict[str, list[str]]) -> bool:
    """Whether ``info`` passes: every key given matches one of its values (as
    ``docker ps --filter``: the values of one key are alternatives)."""
    return all(any(_matches(info, k, v) for v in vs) for k, vs in filters.items())


# Columns in the order shown; those dropped first when the terminal is too narrow.
HEADER = ("ID", "NAME", "BACKEND", "STATE", "NODES", "RESTARTS", "UPTIME", "PID", "RUN DIR")
DROP_ORDER = ("RUN DIR", "PID", "RESTARTS", "BACKEND", "UPTIME", "NODES")
SHORTEN = ("RUN DIR", "NAME", "STATE")  # cut with … (a path keeps its end) before dropping
MIN_CUT = 12  # a cell is not cut shorter than this
GAP = "  "


def _widths(rows: list[tuple[str, ...]]) -> list[int]:
    return [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]


def _cut(text: str, width: int, keep_end: bool) -> str:
    if len(text) <= width:
        return text
    return "…" + text[len(text) - width + 1 :] if keep_end else text[: width - 1] + "…"


def _project(rows: list[tuple[str, ...]], names: list[str], kept: list[str]) -> list[list[str]]:
    at = [names.index(n) for n in kept]
    return [[r[k] for k in at] for r in rows]


def fit(rows: list[tuple[str, ...]], width: int | None) -> list[str]:
    """The lines of the table (``rows[0]`` is the header): columns as wide as their
    longest cell; with a ``width`` (a terminal), columns cut or dropped until a line fits
    (the run directory first: ``topo status RUN`` shows it)."""
    names = list(rows[0])
    kept = list(names)
    table = _project(rows, names, kept)
    if width is not None:
        for name in DROP_ORDER:
            if _total(table) <= width:
                break
            if name in SHORTEN and _shrink(table, kept, name, width):
                break
            if name in kept:
                kept.remove(name)
                table = _project(rows, names, kept)
        for name in SHORTEN:
            if _total(table) > width and name in kept:
                _shrink(table, kept, name, width)
    widths = _widths([tuple(r) for r in table])
    return [GAP.join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in table]


def _total(table: list[list[str]]) -> int:
    widths = _widths([tuple(r) for r in table])
    return sum(widths) + len(GAP) * (len(widths) - 1)


def _shrink(table: list[list[str]], kept: list[str], name: str, width: int) -> bool:
    """Cut column ``name`` so that the table fits ``width`` if it can (not below
    ``MIN_CUT``, nor below its header); whether it fits now."""
    if name not in kept:
        return False
    k = kept.index(name)
    current = max(len(r[k]) for r in table)
    room = current - (_total(table) - width)
    floor = max(MIN_CUT, len(name))
    if room < floor:
        return False
    for row in table[1:]:
        row[k] = _cut(row[k], room, keep_end=name == "RUN DIR")
    return _total(table) <= width
