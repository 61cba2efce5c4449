"""The typer application object shared by every command module; its root group imports a
command's module only when that command is used (``topo.cli.lazy``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

import topo
from topo.cli import coerce
from topo.cli.helpfmt import TopoCommand
from topo.cli.lazy import LazyGroup

coerce.install()  # plain values without pydantic


class TopoTyper(typer.Typer):
    """typer's application whose commands are ``TopoCommand`` unless they name their
    own class (one help and usage convention for all: ``topo.cli.helpfmt``)."""

    def command(
        self, name: str | None = None, *, cls: type[Any] | None = None, **kwargs: Any
    ) -> Callable[[Any], Any]:
        return super().command(name, cls=cls or TopoCommand, **kwargs)


app = TopoTyper(
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
