"""``topo top RUN``: a live table of a run's nodes -- CPU, memory, calls served and made
per second, the p50 and p99 latency of the calls served, the leading metric's rate --
sorted by any column, a group of replicas as one row unless expanded; it fits 80
columns. Reads ``status.json`` (kept current by the launcher) and, for nodes whose
processes are on this machine, their CPU and memory by pid (``topo.runs.top_rows``)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from topo.cli.app import app
from topo.cli.operate import LiveRunArgument, LogDirOption, pick_run, say

if TYPE_CHECKING:
    from rich.table import Table

    from topo.runs.probe import RunInfo
    from topo.runs.top_rows import Row

ABSENT = "·"  # a figure there is none of (no calls, a process on another host)


def _number(value: float | None, digits: int = 1) -> str:
    if value is None:
        return ABSENT
    if value >= 10_000:
        return f"{value / 1000:.0f}k"
    if value >= 100 or digits == 0:
        return f"{value:.0f}"
    return f"{value:.{digits}f}"


def _bytes(value: int | None) -> str:
    if value is None:
        return ABSENT
    for unit, size in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= size:
            return f"{value / size:.1f}{unit}" if value < 10 * size else f"{value // size}{unit}"
    return f"{value}B"


def _latency(ms: float | None) -> str:
    if ms is None:
        return ABSENT
    if ms >= 1000:
        return f"{ms / 1000:.1f}s"
    return f"{ms:.1f}ms" if ms < 10 else f"{ms:.0f}ms"


def render(info: RunInfo, rows: list[tuple[Row, bool]], sort: str, width: int) -> Table:
    """The table of ``rows`` for a terminal ``width`` columns wide."""
    from rich.table import Table

    where = {"remote": "on another host", "shared": "one process", "gone": "no process"}
    table = Table(
        title=f"{info.name} ({info.id}) {info.backend} · {info.state} · sorted by {sort}",
        title_justify="left",
        box=None,
        pad_edge=False,
        header_style="bold",
        width=min(width, 120),
    )
    table.add_column("node", no_wrap=True, overflow="ellipsis", ratio=1, min_width=10)
    table.add_column("state", no_wrap=True, overflow="ellipsis", max_width=12)
    for name in ("cpu%", "mem", "in/s", "out/s", "p50", "p99", "rate"):
        table.add_column(name, justify="right", no_wrap=True)
    notes = set()
    for row, member in rows:
        name = f"  {row.name}" if member else row.name
        if row.where in where and row.cpu is None:
            notes.add(f"{ABSENT} cpu, mem: {where[row.where]}")
        table.add_row(
            name,
            row.state,
            _number(row.cpu),
            _bytes(row.mem),
            _number(row.calls_in),
            _number(row.calls_out),
            _latency(row.p50_ms),
            _latency(row.p99_ms),
            _number(row.rate),
        )
    rates = sorted({r.rate_name for r, _ in rows if r.rate_name})
    caption = [f"rate: {', '.join(rates)}"] if rates else []
    # (always a caption line: a live table that grows by a line leaves its title behind)
    table.caption = " · ".join([*caption, *sorted(notes)]) or "rate: none yet"
    table.caption_justify = "left"
    return table


def _figures(info: RunInfo) -> Any:
    from topo.ui.procinfo import process_figures

    launcher = dict(info.status.get("launcher") or {})

    def figures(entry: Any) -> Any:
        if entry.get("state") not in ("running", "starting", "stopping"):
            return {"where": "gone"}
        return process_figures(entry.get("pid"), entry.get("host"), launcher, info.backend)

    return figures


@app.command("top")
def top(
    run: LiveRunArgument,
    sort: Annotated[
        str,
        typer.Option(
            "--sort", "-s", help="The column to sort by: cpu, mem, in, out, p50, p99, rate, name."
        ),
    ] = "cpu",
    expand: Annotated[
        list[str] | None,
        typer.Option(
            "--expand", "-e", help="Show this group's replicas one by one (repeat; * for all)."
        ),
    ] = None,
    every: Annotated[float, typer.Option("--every", help="Seconds between looks.")] = 2.0,
    once: Annotated[
        bool, typer.Option("--once", help="Print the table once (after two looks) and end.")
    ] = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Show a live table of a run's nodes: CPU, memory, calls, latency.

    Calls in and out are per second; p50 and p99 are the latency of the calls a node
    serves over the last seconds (of the calls it makes, for a node that serves none);
    rate is its leading metric's (steps per second). A group of replicas is one row
    (sums; the median p50, the worst p99) unless expanded. Ctrl-C ends it."""
    from rich.console import Console
    from rich.live import Live

    from topo.runs.resolve import resolve
    from topo.runs.top_rows import SORTS, Sampler, table_rows

    if sort not in SORTS:
        say(f"error: --sort {sort}: expected one of {', '.join(SORTS)}", "red")
        raise typer.Exit(2)
    if every <= 0:
        say("error: --every must be above 0 seconds", "red")
        raise typer.Exit(2)
    info = pick_run(run, log_dir)
    if not info.live:
        say(f"error: run {info.id} is not running ({info.state}): nothing to watch", "red")
        raise typer.Exit(1)
    console = Console(highlight=False)
    sampler, groups = Sampler(), frozenset(expand or [])
    figures = _figures(info)

    def look() -> Table:
        now = resolve(str(info.run_dir), log_dir)
        rows = table_rows(list(now.status.get("nodes") or []), figures, sampler, sort, groups)
        return render(now, rows, sort, console.width)

    look()  # the first look starts the CPU and rate measures
    time.sleep(min(every, 1.0) if once else 0.2)
    if once or not console.is_terminal:
        console.print(look())
        return
    # On the terminal's alternate screen, as top's: at the end (Ctrl-C, the run over) the
    # screen comes back and the last table is printed once (redrawn in place, a Ctrl-C's
    # echo moved the cursor and the title line was left twice).
    table = look()
    try:
        with Live(table, console=console, auto_refresh=False, screen=True) as live:
            while True:
                time.sleep(every)
                table = look()
                live.update(table, refresh=True)
                if not resolve(str(info.run_dir), log_dir).live:
                    break
    except KeyboardInterrupt:
        pass
    console.print(table)
