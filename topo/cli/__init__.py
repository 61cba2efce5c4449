"""The ``topo`` command line: one module per command, all registered on one typer app."""

from __future__ import annotations

import importlib

from topo.cli.app import app

# Each command module registers itself on ``app`` when imported.
for _module in (
    "validate",
    "plan",
    "schema",
    "graph",
    "run",
    "plot",
    "export",
    "operate",
    "logs",
    "attach",
):
    importlib.import_module(f"topo.cli.{_module}")


def main() -> None:
    """Console-script entry point. Bad input exits 1 everywhere, so click's usage errors
    (unknown option, bad option value), which exit 2, exit 1 here too."""
    try:
        app(prog_name="topo")
    except SystemExit as exc:
        if exc.code == 2:
            raise SystemExit(1) from None
        raise


__all__ = ["app", "main"]
