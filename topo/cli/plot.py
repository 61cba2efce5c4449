"""``topo plot RUN_DIR``: learning curves from a run's metric rows, drawn to a PNG.

Reads ``<RUN_DIR>/metrics/*.jsonl`` (what ``topo.metrics`` loggers wrote), draws one
subplot per metric and one line per node (per node and label when a node logs under
several labels), against the seconds since the run started or a chosen key such as
``actor_steps``. matplotlib (the ``plot`` extra) is imported only here, only to draw,
with the Agg backend: nothing else in the CLI pays for it (nor for topo.backends).
"""

from __future__ import annotations

import fnmatch
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from topo.cli.app import app
from topo.cli.common import stderr

MAX_DEFAULT_PLOTS = 6
MAX_LEGEND = 12  # series; more get no legend (the title says how many)
ELAPSED = "elapsed_s"
INSTALL_HINT = "pip install 'topo-launch[plot]'"


class PlotError(Exception):
    """A user error: the message says what is wrong and what to do."""


@dataclass
class Curves:
    """The rows of a run, grouped: series name -> rows, and the numeric keys seen."""

    series: dict[str, list[dict[str, Any]]]
    numeric: list[str]  # in the order first seen
    started: float
    bad_lines: int


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    if value in ("nan", "inf", "-inf"):  # stored as strings to keep the files JSON
        return float(value)
    return None


def load_curves(run_dir: Path, node_glob: str | None = None) -> Curves:
    """Read a run's metric rows (only nodes matching ``node_glob``), or PlotError."""
    from topo.rundir.layout import METRICS_DIR
    from topo.runs.figures import STAMPS
    from topo.supervisor.metrics_store import read_rows

    if not run_dir.is_dir():
        raise PlotError(f"{run_dir} is not a directory (give the run directory of a topo run)")
    if not (run_dir / METRICS_DIR).is_dir():
        raise PlotError(
            f"{run_dir} has no {METRICS_DIR}/ directory: no node of this run wrote metrics "
            "(write them with topo.metrics.logger(...).write({...}))"
        )
    rows: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    numeric: dict[str, None] = {}
    nodes: set[str] = set()
    bad = 0
    for _path, _line, row in read_rows(run_dir):
        if row is None or not isinstance(row.get("node"), str) or _number(row.get("time")) is None:
            bad += 1
            continue
        nodes.add(row["node"])
        if node_glob is not None and not fnmatch.fnmatchcase(row["node"], node_glob):
            continue
        rows[(row["node"], str(row.get("label", "")))].append(row)
        for key, value in row.items():
            if key not in STAMPS and _number(value) is not None:
                numeric.setdefault(key)
    if not nodes:
        raise PlotError(f"{run_dir / METRICS_DIR} holds no metric rows")
    if not rows:
        raise PlotError(
            f"no node matches --node {node_glob!r}; nodes with metrics: {', '.join(sorted(nodes))}"
        )
    labels: dict[str, int] = defaultdict(int)
    for node, _label in rows:
        labels[node] += 1
    series = {
        (f"{node} [{label}]" if labels[node] > 1 and label else node): sorted(
            group, key=lambda r: float(r["time"])
        )
        for (node, label), group in sorted(rows.items())
    }
    first = min(float(r["time"]) for group in series.values() for r in group)
    return Curves(series, list(numeric), _started(run_dir, first), bad)


def _started(run_dir: Path, fallback: float) -> float:
    """When the run started (``status.json``), else its first row."""
    from topo.rundir.status import read_status

    started = (read_status(run_dir) or {}).get("started")
    try:
        return float(started) if started else fallback
    except (ValueError, TypeError):
        return fallback


def choose_keys(curves: Curves, x: str | None, ys: list[str] | None) -> tuple[str, list[str]]:
    """The x key (``elapsed_s`` by default) and the y keys to draw, or PlotError."""
    from topo.runs.figures import rank_keys

    known = curves.numeric
    x_key = x or ELAPSED
    if x_key != ELAPSED and x_key not in known:
        raise PlotError(f"unknown --x key {x_key!r}; numeric keys: {', '.join(known)}")
    if ys:
        unknown = [y for y in ys if y not in known]
        if unknown:
            raise PlotError(
                f"unknown --y key {', '.join(map(repr, unknown))}; numeric keys: "
                f"{', '.join(known) or '(none)'}"
            )
        return x_key, list(dict.fromkeys(ys))
    chosen = [k for k in rank_keys(known) if k != x_key][:MAX_DEFAULT_PLOTS]
    if not chosen:
        raise PlotError("the metric rows hold no numeric values to plot")
    return x_key, chosen


def _points(rows: list[dict[str, Any]], x: str, y: str, t0: float) -> tuple[list[float], ...]:
    xs, ys = [], []
    for row in rows:
        xv = float(row["time"]) - t0 if x == ELAPSED else _number(row.get(x))
        yv = _number(row.get(y))
        if xv is not None and yv is not None and math.isfinite(xv):
            xs.append(xv)
            ys.append(yv)
    return xs, ys


def draw(curves: Curves, x: str, ys: list[str], out: Path, title: str) -> None:
    """One subplot per y key, one line per series, saved as a PNG at ``out``."""
    try:
        import matplotlib
    except ImportError:
        raise PlotError(f"topo plot needs matplotlib: {INSTALL_HINT}") from None
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    cols = 1 if len(ys) == 1 else 2
    rows = math.ceil(len(ys) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(6.4 * cols, 3.6 * rows), squeeze=False)
    try:
        for ax, y in zip(axes.flat, ys, strict=False):
            for name, group in curves.series.items():
                xs, values = _points(group, x, y, curves.started)
                if xs:
                    marker = "." if len(xs) < 30 else ""
                    ax.plot(xs, values, label=name, linewidth=1.2, marker=marker)
            ax.set_title(y)
            ax.set_xlabel("seconds since start" if x == ELAPSED else x)
            ax.grid(True, alpha=0.3)
            if len(curves.series) <= MAX_LEGEND and ax.has_data():
                ax.legend(fontsize="small")
        for ax in list(axes.flat)[len(ys) :]:
            ax.set_visible(False)
        fig.suptitle(f"{title} ({len(curves.series)} series)")
        fig.tight_layout()
        fig.savefig(out, format="png", dpi=100)
    finally:
        plt.close(fig)


def plot_run(
    run_dir: Path,
    out: Path | None = None,
    x: str | None = None,
    ys: list[str] | None = None,
    node_glob: str | None = None,
) -> tuple[Path, int]:
    """Draw ``run_dir``'s learning curves: the PNG written (default
    ``<run_dir>/metrics.png``) and how many lines were not metric rows (skipped).
    Raises PlotError on a user error."""
    curves = load_curves(run_dir, node_glob)
    x_key, y_keys = choose_keys(curves, x, ys)
    from topo.rundir.layout import PLOT_FILE

    target = out or run_dir / PLOT_FILE
    try:
        draw(curves, x_key, y_keys, target, run_dir.name)
    except OSError as exc:
        raise PlotError(f"cannot write {target}: {exc.strerror or exc}") from None
    return target, curves.bad_lines


@app.command("plot")
def plot(
    run_dir: Annotated[
        Path,
        typer.Argument(
            metavar="RUN_DIR",
            help="Run directory of a topo run (runs/<name>-<timestamp>).",
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            metavar="PNG",
            help="PNG file to write (default: RUN_DIR/metrics.png).",
        ),
    ] = None,
    x: Annotated[
        str | None,
        typer.Option(
            "--x",
            metavar="KEY",
            help="Key on the x axis, e.g. actor_steps (default: seconds since start).",
        ),
    ] = None,
    y: Annotated[
        list[str] | None,
        typer.Option(
            "--y",
            metavar="KEY",
            help="Metric to plot, one subplot each (repeatable; default: up to 6 numeric "
            "keys, return-like ones first).",
        ),
    ] = None,
    node: Annotated[
        str | None,
        typer.Option(
            "--node", metavar="GLOB", help="Only nodes whose id matches this glob, e.g. 'actor/*'."
        ),
    ] = None,
) -> None:
    """Draw a run's learning curves to a PNG.

    The curves are the rows its nodes wrote with topo.metrics."""
    try:
        written, bad = plot_run(run_dir, out, x, y, node)
    except PlotError as exc:
        stderr.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    if bad:
        stderr.print(f"[yellow]warning:[/yellow] skipped {bad} line(s) that are not metric rows")
    stderr.print(f"wrote {escape(str(written))}")
