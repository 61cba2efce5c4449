"""A node kind declared outside topo, for tests: ``greeter`` writes a greeting to a file.

Registered in-process with ``register_kind(GREETER)`` and, in a subprocess, through an
entry point of the group ``topo.kinds``; topo's own modules know nothing about it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from topo.kinds import Look, NodeKind, Options


class GreeterOptions(Options):
    """The greeter's own YAML fields."""

    greeting: str | None = Field(None, description="greeter only: the text written.")
    out: str | None = Field(None, description="greeter only: the file it is written to.")


def greet(greeting: str, out: str, times: int = 1) -> None:
    """The greeter's built-in target: write ``greeting`` ``times`` times to ``out``."""
    Path(out).write_text(greeting * times)


def _args(options: GreeterOptions) -> dict[str, Any]:
    return {"greeting": options.greeting, "out": options.out}


GREETER = NodeKind(
    name="greeter",
    help="writes a greeting to a file (a test kind)",
    options=GreeterOptions,
    required="greeting",
    example="hello",
    builtin_target="kind_plugin:greet",
    args=_args,
    served=False,
    draw="greeter",
    looks={"greeter": Look("note", "filled", ("[/", "/]"), "#e0f7fa", "#00838f", "cyan")},
)
