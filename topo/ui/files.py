"""A node's log and metric rows for the dashboard, read from the run directory in
bounded pieces: the last lines of a log, its lines from an offset on (follow), lines
matching a search, and each node's metric rows from an offset on (growing charts).

Logs rotate (``<node>.log.1`` ...): a follower whose offset is past the end of the file
starts over at the new file's beginning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from topo.rundir.layout import log_path, metrics_files, with_rotated
from topo.ui.reader import read_json_lines

TAIL_BYTES = 256 * 1024  # the most of a log sent at once
MAX_LINE = 4000  # characters of one line shown
MAX_MATCHES = 1000
METRIC_BYTES = 2 * 2**20  # the most of one node's metric rows sent at once


def _lines(data: bytes) -> list[str]:
    text = data.decode("utf-8", "replace")
    return [line[:MAX_LINE] for line in text.splitlines()]


def log_tail(run_dir: Path, node: str, lines: int = 500) -> dict[str, Any]:
    """The last ``lines`` lines of a node's log and the offset to follow it from."""
    path = log_path(run_dir, node)
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            start = max(0, size - TAIL_BYTES)
            f.seek(start)
            data = f.read(size - start)
    except OSError:
        return {"lines": [], "offset": 0, "missing": True}
    if start:
        data = data[data.find(b"\n") + 1 :]  # a whole first line
    end = data.rfind(b"\n") + 1
    return {"lines": _lines(data[:end])[-lines:], "offset": start + end if start else end}


def log_since(run_dir: Path, node: str, offset: int) -> dict[str, Any]:
    """The whole lines written since ``offset`` (at most ``TAIL_BYTES``; a rotated file
    is read from its beginning, ``reset`` says so)."""
    path = log_path(run_dir, node)
    try:
        with open(path, "rb") as f:
            size = f.seek(0, 2)
            reset = size < offset
            start = 0 if reset else offset
            if size - start > TAIL_BYTES:  # far behind: the newest part
                start = size - TAIL_BYTES
                reset = True
            f.seek(start)
            data = f.read(size - start)
    except OSError:
        return {"lines": [], "offset": offset}
    if reset and start:
        data = data[data.find(b"\n") + 1 :]
        start = size - len(data)
    end = data.rfind(b"\n") + 1
    return {"lines": _lines(data[:end]), "offset": start + end, "reset": reset}


def log_search(run_dir: Path, node: str, text: str) -> dict[str, Any]:
    """The lines of a node's logs (rotated files first) that hold ``text`` (any case):
    the last ``MAX_MATCHES``."""
    needle = text.lower()
    found: list[str] = []
    total = 0
    for p in with_rotated(log_path(run_dir, node)):
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                for line in f:
                    if needle in line.lower():
                        total += 1
                        found.append(line.rstrip("\n")[:MAX_LINE])
                        if len(found) > MAX_MATCHES:
                            del found[0]
        except OSError:
            continue
    return {"lines": found, "matches": total}


def metric_files(run_dir: Path) -> dict[str, Path]:
    """Node file name -> its metric rows file."""
    return {p.stem: p for p in metrics_files(run_dir)}


def metric_rows(run_dir: Path, offsets: dict[str, int]) -> dict[str, Any]:
    """Every node's metric rows from its offset on (``offsets``: file name -> offset;
    a file not named is read from its start): ``{name: {"offset": n, "rows": [...]}}``
    holding only the files with new rows."""
    out: dict[str, Any] = {}
    for name, path in metric_files(run_dir).items():
        offset = offsets.get(name, 0)
        rows, after = read_json_lines(path, offset, METRIC_BYTES)
        if after == offset:  # unreadable, or no whole line yet
            continue
        out[name] = {"offset": after, "rows": [_numbers(row) for row in rows]}
    return out


def _numbers(row: dict[str, Any]) -> dict[str, Any]:
    """A row's numeric values (and its node): what a chart can draw."""
    keep: dict[str, Any] = {}
    for k, v in row.items():
        if k == "node" or (isinstance(v, int | float) and not isinstance(v, bool)):
            keep[k] = v
    return keep
