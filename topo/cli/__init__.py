"""The ``topo`` command line: one module per command, all registered on one typer app."""

from __future__ import annotations

import importlib

from topo.cli.app import app

# Each command module registers itself on ``app`` when imported.
for _module in ("validate", "plan", "schema", "graph", "run"):
    try:
        importlib.import_module(f"topo.cli.{_module}")
    except ModuleNotFoundError as exc:  # a command still being built
        if exc.name != f"topo.cli.{_module}":
            raise


def main() -> None:
    """Console-script entry point."""
    app()


__all__ = ["app", "main"]
