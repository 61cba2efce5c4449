"""Shared fixtures for the renderer tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import typer

sys.path.insert(0, str(Path(__file__).parent))

from render_programs import SEEDS

from topo.ir import Program


@pytest.fixture(params=sorted(SEEDS))
def seed(request: pytest.FixtureRequest) -> Program:
    """Each hand-built seed topology in turn."""
    return SEEDS[request.param]()


@pytest.fixture
def cli() -> typer.Typer:
    """A typer app holding only ``graph`` as a sub-command (independent of other commands)."""
    from topo.cli.graph import graph

    app = typer.Typer(pretty_exceptions_enable=False)
    app.callback()(lambda: None)
    app.command("graph")(graph)
    return app
