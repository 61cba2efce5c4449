"""``topo plan``: print the compiled Program IR — what would start where."""

from __future__ import annotations

from typing import Annotated

import typer

from topo.cli.app import app
from topo.cli.common import FileArgument, ParamsOption, load_program, stdout


@app.command("plan")
def plan(
    file: FileArgument,
    params: ParamsOption = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the IR as JSON (lossless, versioned).")
    ] = False,
) -> None:
    """Compile FILE and print the plan: executables, their nodes, arguments and references."""
    from topo.ir import dumps
    from topo.ir.printer import format_program

    program = load_program(file, params)
    if as_json:
        print(dumps(program))
    else:
        stdout.print(format_program(program), highlight=False, markup=False, soft_wrap=True)
