"""``topo validate``: check a topology and summarise what it compiles to."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from topo.cli.app import app
from topo.cli.common import FileArgument, ParamsOption, load_topology, stderr, stdout
from topo.diagnostics import render_diagnostics
from topo.ir import Program, SnapshotSettings
from topo.ir.printer import format_snapshots, format_value


def summary(program: Program, params_help: dict[str, str], overridden: set[str]) -> list[Table]:
    """Tables for parameters, groups, and totals."""
    tables = []
    if len(program.params):
        pt = Table(title="parameters", title_justify="left", show_edge=False)
        pt.add_column("name", style="bold")
        pt.add_column("value")
        pt.add_column("")
        for name, value in program.params.items():
            # User strings go in as Text, never as markup: "[/bold]" in a value or a help
            # text is shown as it is.
            note = Text("-p", style="yellow") if name in overridden else Text()
            note.append("  " + params_help.get(name, ""))
            pt.add_row(Text(name), Text(format_value(value)), note)
        tables.append(pt)

    exes_per_group: Counter[str] = Counter()
    for exe in program.executables:
        for group_name in {program.node(n).group for n in exe.nodes}:
            exes_per_group[group_name] += 1
    out_edges: Counter[str] = Counter()
    for e in program.edges:
        out_edges[program.node(e.src).group] += 1
    gt = Table(title="groups", title_justify="left", show_edge=False)
    for col in ("group", "kind", "count", "target", "processes", "restart", "edges out"):
        gt.add_column(
            col, justify="right" if col in ("count", "processes", "edges out") else "left"
        )
    for g in program.groups:
        style = None if g.enabled else "dim"
        count = str(g.count) if g.enabled else "disabled"
        restart: str = g.restart.policy
        if g.restart.policy != "never":
            restart += f" ×{g.restart.max_restarts}"
        gt.add_row(
            Text(g.name), g.kind, count, Text(g.target), str(exes_per_group[g.name]), restart,
            str(out_edges[g.name]), style=style,
        )  # fmt: skip
    tables.append(gt)
    return tables


@app.command("validate")
def validate(
    file: FileArgument,
    params: ParamsOption = None,
    check_imports: Annotated[
        bool,
        typer.Option(
            "--check-imports",
            help="Also import every target as topo run does and check its arguments.",
        ),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print nothing when valid.")] = False,
) -> None:
    """Check a topology file and print a summary of it.

    Checks its YAML, parameters, references and colocation. Exit 1 on errors."""
    loaded = load_topology(file, params, check_imports=check_imports)
    program = loaded.program
    if loaded.warnings:
        render_diagnostics(loaded.warnings, stderr)
    if quiet:
        return
    declared = loaded.spec.params
    helps = {name: p.help for name, p in declared.items()}
    overridden = {name for name, p in declared.items() if p.overridden}
    for table in summary(program, helps, overridden):
        stdout.print(table)
        stdout.print()
    if program.snapshots != SnapshotSettings():
        stdout.print(f"snapshots: {format_snapshots(program.snapshots)}", highlight=False)
    stdout.print(
        f"[green]✓[/green] [bold]{escape(str(Path(file)))}[/bold]: program "
        f"[bold]{escape(program.name)}[/bold] — "
        f"{len(program.nodes)} nodes in {len(program.executables)} processes, "
        f"{len(program.edges)} edges"
    )
