"""The typer application object shared by every command module; its root group imports a
command's module only when that command is used (``topo.cli.lazy``)."""

from __future__ import annotations

from typing import Annotated

import typer

import topo
from topo.cli import coerce
from topo.cli.lazy import LazyGroup

coerce.install()  # plain values without pydantic

app = typer.Typer(
    name="topo",
    cls=LazyGroup,
    help="Check, draw and run distributed Python programs described in YAML.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
    context_settings={"help_option_names": ["-h", "--help"]},
)
LazyGroup.typer_app = app  # the command modules register on it; the root group builds from it


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"topo {topo.__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            "-V",
            callback=_print_version,
            is_eager=True,
            help="Print topo's version and exit.",
        ),
    ] = False,
) -> None:
    """Check, draw and run distributed Python programs described in YAML."""
