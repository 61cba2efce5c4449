"""What every command shares: the ``-p`` option, loading a topology, printing diagnostics."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from topo.diagnostics import TopoError, render_diagnostics
from topo.ir import Program

ParamsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        "-p",
        metavar="NAME=VALUE",
        help="Override a parameter declared under params: (repeatable), e.g. -p num_actors=64.",
    ),
]
FileArgument = Annotated[
    Path, typer.Argument(metavar="FILE", help="Topology YAML file.", show_default=False)
]

stderr = Console(stderr=True, highlight=False, soft_wrap=True)
# Piped output is not cut to 80 columns: tables keep whole target paths.
stdout = Console(highlight=False, width=None if sys.stdout.isatty() else 160)


def fail(error: TopoError) -> typer.Exit:
    """Print a user error with its positions and return the exit to raise (code 1)."""
    render_diagnostics(error.diagnostics, stderr)
    return typer.Exit(1)


def load_program(file: Path, params: list[str] | None, *, check_imports: bool = False) -> Program:
    """Load, interpolate and compile ``file``; on bad input print the errors and exit 1."""
    from topo.compile import compile_spec
    from topo.spec import load_spec

    try:
        spec = load_spec(file, overrides=params or [])
        return compile_spec(spec, check_imports=check_imports)
    except TopoError as error:
        raise fail(error) from None
