"""``topo plan``: print the compiled Program IR — what would start where, and who may
call whom."""

from __future__ import annotations

from typing import Annotated

import typer

from topo.cli.app import app
from topo.cli.common import (
    BackendCommand,
    FileArgument,
    ParamsOption,
    backend_options,
    fail,
    load_program,
    stderr,
    stdout,
)
from topo.cli.complete import complete_backend
from topo.diagnostics import TopoError


class PlanCommand(BackendCommand):
    """``topo plan``: its options and those of the backend ``--backend`` names."""

    default_backend = None


@app.command("plan", cls=PlanCommand)
def plan(
    ctx: typer.Context,
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
            help="Also print where the backend would run each executable (ssh: on the hosts "
            "of --hosts; ray: the placement groups and resources asked of Ray; slurm: the "
            "sbatch script topo run would submit, checked against the partition); with "
            "--json the placement is checked, not printed. `topo plan -b NAME --help` lists "
            "the backend's options.",
            autocompletion=complete_backend,
        ),
    ] = None,
) -> None:
    """Compile FILE and print the plan of its executables.

    Each executable with its nodes, their arguments and references, and who may call
    whom (each node only the nodes its arguments refer to)."""
    from topo.backends.base import placement_text
    from topo.ir import dumps
    from topo.ir.printer import format_program
    from topo.ir.rights import format_rights

    name, options = backend, backend_options(ctx)
    program = load_program(file, params)
    placed = None
    if name is not None:
        try:
            placed = placement_text(name, program, **options)
        except TopoError as error:  # a bad inventory, a placement that cannot be
            raise fail(error) from None
    if as_json:
        print(dumps(program))
        return
    stdout.print(format_program(program), highlight=False, markup=False, soft_wrap=True)
    stdout.print(format_rights(program), highlight=False, markup=False, soft_wrap=True)
    if placed is not None:
        stdout.print(placed, highlight=False, markup=False, soft_wrap=True)
    from topo.supervisor.preflight import exposure_warnings

    for warning in exposure_warnings(program, name in (None, "procs", "threads")):
        stderr.print(warning.headline(), markup=False)
        if warning.hint:
            stderr.print(f"  hint: {warning.hint}", markup=False)
