"""``topo plan``: print the compiled Program IR — what would start where."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from topo.cli.app import app
from topo.cli.common import FileArgument, ParamsOption, fail, load_program, stderr, stdout
from topo.diagnostics import TopoError
from topo.ir import Program


@app.command("plan")
def plan(
    file: FileArgument,
    params: ParamsOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the IR as JSON (lossless, versioned).")
    ] = False,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend",
            "-b",
            help="With ssh: also place the executables on the hosts of --hosts and print where "
            "each runs (with --json the placement is checked, not printed). With ray: print "
            "the placement groups and resources each executable asks of Ray.",
        ),
    ] = None,
    hosts: Annotated[
        Path | None,
        typer.Option("--hosts", help="Inventory file of the ssh backend (hosts.yaml)."),
    ] = None,
) -> None:
    """Compile FILE and print the plan: executables, their nodes, arguments and references."""
    from topo.ir import dumps
    from topo.ir.printer import format_program

    if hosts is not None and backend != "ssh":
        stderr.print("[red]error:[/] --hosts is the inventory of --backend ssh; add --backend ssh")
        raise typer.Exit(1)
    if backend == "ssh" and hosts is None:
        stderr.print("[red]error:[/] --backend ssh needs --hosts FILE (the inventory of hosts)")
        raise typer.Exit(1)
    program = load_program(file, params)
    placed = _placement(program, hosts) if hosts is not None else None
    if backend == "ray":
        from topo.backends.ray.placement import format_ray_placement

        placed = format_ray_placement(program)
    if as_json:
        print(dumps(program))
        return
    stdout.print(format_program(program), highlight=False, markup=False, soft_wrap=True)
    if placed is not None:
        stdout.print(placed, highlight=False, markup=False, soft_wrap=True)


def _placement(program: Program, hosts: Path) -> str:
    """The placement of ``program`` on the inventory ``hosts``, as text; on a bad inventory
    or an impossible placement print the errors and exit 1."""
    from topo.backends.ssh.inventory import load_inventory
    from topo.backends.ssh.placement import format_placement, place

    try:
        inventory = load_inventory(hosts)
        return format_placement(place(program, inventory), program, inventory)
    except TopoError as error:
        raise fail(error) from None
