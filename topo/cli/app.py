"""The typer application object shared by every command module."""

from __future__ import annotations

import typer

app = typer.Typer(
    name="topo",
    help="Check, draw and run distributed Python programs described in YAML.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
