"""What every command shares: the ``-p`` option, loading a topology, printing diagnostics."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from topo.diagnostics import TopoError, render_diagnostics
from topo.ir import Program

if TYPE_CHECKING:
    from topo.api import Loaded

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

stderr = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)  # ":100:" is a line
# Piped output is not cut to 80 columns: tables keep whole target paths.
stdout = Console(highlight=False, emoji=False, width=None if sys.stdout.isatty() else 160)


def fail(error: TopoError) -> typer.Exit:
    """Print a user error with its positions and return the exit to raise (code 1)."""
    render_diagnostics(error.diagnostics, stderr)
    return typer.Exit(1)


def load_program(file: Path, params: list[str] | None, *, check_imports: bool = False) -> Program:
    """``topo.api.load`` (the one load path of the CLI and the API) for a command: on bad
    input print the errors and exit 1."""
    return load_topology(file, params, check_imports=check_imports).program


def load_topology(file: Path, params: list[str] | None, *, check_imports: bool = False) -> Loaded:
    """``topo.api.load``: the program and its resolved YAML text; on bad input print the
    errors and exit 1."""
    from topo.api import load

    try:
        return load(file, params or [], check_imports=check_imports)
    except TopoError as error:
        raise fail(error) from None
