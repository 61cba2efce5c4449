"""The launcher's side of ``topo.metrics``: metric rows on disk and the latest figures.

Rows reach the launcher over the registry's ``metrics`` RPC (every backend). Each
row is checked -- a dict with string keys and scalar values (int, float, str, bool,
None), ``time`` a number, ``node`` a node of the program, bounded sizes -- and
appended to ``<run_dir>/metrics/<node>.jsonl`` (one JSON object per line; each
node's file opened once, flushed per batch). A bad row is dropped and counted, and
the first one is named in the run's warnings; it never stops the run. The latest
values of each node, merged, are what the live view and ``status.json`` show. A run
may ask for the rows as CSV and TensorBoard event files too (``metrics_out``).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from topo.rundir.layout import METRICS_DIR, metrics_files, metrics_path
from topo.runs.figures import STAMPS
from topo.supervisor.metrics_out import outputs

MAX_KEYS = 100  # per row
MAX_KEY_CHARS = 200
MAX_STR_CHARS = 1000  # per string value
MAX_STR_BYTES = 256 * 1024  # string characters taken from one batch; later rows are dropped
MAX_LATEST_KEYS = 64  # merged keys kept per node for the view and status.json


def check_row(row: Any, nodes: Mapping[str, Any]) -> str | None:
    """Why ``row`` cannot be stored, or None when it can."""
    if not isinstance(row, dict):
        return f"a row must be a dict, got {type(row).__name__}"
    if len(row) > MAX_KEYS:
        return f"a row has {len(row)} keys (at most {MAX_KEYS})"
    node = row.get("node")
    if not isinstance(node, str) or node not in nodes:
        return f"node {node!r} is not a node of the program"
    stamp = row.get("time")
    if not isinstance(stamp, int | float) or isinstance(stamp, bool) or not math.isfinite(stamp):
        return f"time {stamp!r} is not a number"
    for key, value in row.items():
        if not isinstance(key, str) or not key or len(key) > MAX_KEY_CHARS:
            return f"key {key!r} must be a non-empty string of at most {MAX_KEY_CHARS} characters"
        if value is not None and not isinstance(value, int | float | str | bool):
            return f"metric {key!r} is a {type(value).__name__}, not a scalar"
        if isinstance(value, str) and len(value) > MAX_STR_CHARS:
            return f"metric {key!r} is a string of {len(value)} characters"
    return None


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    """Non-finite floats as strings ("nan", "inf"): the files stay strict JSON."""
    return {
        k: str(v) if isinstance(v, float) and not math.isfinite(v) else v for k, v in row.items()
    }


class MetricsStore:
    """Appends checked rows to per-node JSON-lines files; keeps each node's latest values.

    ``latest`` maps node id -> merged latest figures (each update replaces the dict, so
    readers in other threads never see one change under them); ``warn`` is called once,
    for the first dropped row."""

    def __init__(
        self,
        run_dir: Path,
        nodes: Mapping[str, Any],
        warn: Callable[[str], None],
        formats: tuple[str, ...] = (),
    ) -> None:
        self.dir = run_dir / METRICS_DIR
        self._outs = outputs(run_dir, formats)  # CSV, TensorBoard: as the run asked
        self._nodes = nodes
        self._warn = warn
        self._lock = threading.Lock()
        self._files: dict[str, IO[str]] = {}
        self.latest: dict[str, dict[str, Any]] = {}
        self.rows = 0
        self.dropped = 0
        self._closed = False

    def add(self, rows: list[Any], over: int = 0) -> list[str]:
        """Check, store and merge ``rows`` (``over``: rows of the same call the registry
        already dropped, over its cap); the ids of the nodes that got new figures."""
        with self._lock:
            if self._closed:
                return []
            if over:
                self._drop(f"{over} rows over the registry's per-call cap", over)
            budget = MAX_STR_BYTES
            touched: dict[str, dict[str, Any]] = {}
            for row in rows:
                problem = check_row(row, self._nodes)
                if problem is None:
                    budget -= sum(len(v) for v in row.values() if isinstance(v, str))
                    if budget < 0:
                        problem = f"more than {MAX_STR_BYTES} string characters in one batch"
                if problem is not None:
                    self._drop(problem)
                    continue
                clean = _jsonable(row)
                node = clean["node"]
                self._file(node).write(json.dumps(clean, separators=(",", ":")) + "\n")
                for out in self._outs:
                    out.write(clean)
                figures = touched.setdefault(node, {})
                figures.update((k, v) for k, v in clean.items() if k not in STAMPS)
                self.rows += 1
            for out in self._outs:
                out.flush()
            for node, figures in touched.items():
                self._files[node].flush()
                merged = {**self.latest.get(node, {}), **figures}
                if len(merged) > MAX_LATEST_KEYS:
                    merged = dict(list(merged.items())[-MAX_LATEST_KEYS:])
                self.latest[node] = merged
            return list(touched)

    def _drop(self, problem: str, count: int = 1) -> None:
        first = self.dropped == 0
        self.dropped += count
        if first:
            self._warn(f"dropped a metrics row: {problem} (bad rows are counted in status.json)")

    def _file(self, node: str) -> IO[str]:
        f = self._files.get(node)
        if f is None:
            path = metrics_path(self.dir.parent, node)
            path.parent.mkdir(exist_ok=True, mode=0o700)
            f = self._files[node] = open(path, "a", encoding="utf-8")
        return f

    def close(self) -> None:
        """Close every file; later rows are ignored."""
        with self._lock:
            self._closed = True
            for f in self._files.values():
                f.close()
            self._files.clear()
            for out in self._outs:
                out.close()


def read_rows(run_dir: Path) -> Iterator[tuple[Path, int, dict[str, Any] | None]]:
    """Every line of ``<run_dir>/metrics/*.jsonl`` as (file, line number, row); row is
    None for a line that is not a JSON object (a file cut short by a crash)."""
    for path in metrics_files(run_dir):
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    row = None
                yield path, number, row if isinstance(row, dict) else None
