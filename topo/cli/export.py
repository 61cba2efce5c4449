"""``topo export``: call a Launchpad program builder and write the topology YAML."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from topo.cli.app import app
from topo.cli.common import fail, stderr
from topo.diagnostics import TopoError

DEFAULT_SCHEMA = "../../schemas/topology.schema.json"

BuilderParams = Annotated[
    list[str] | None,
    typer.Option(
        "--param",
        "-p",
        metavar="NAME=VALUE",
        help="A keyword argument of BUILDER (repeatable), read as a YAML scalar like every "
        "-p: -p num_actors=64 passes the int 64.",
    ),
]


def builder_params(params: list[str] | None) -> dict[str, Any]:
    """``-p k=v`` values read as YAML scalars, as the other commands read them."""
    from topo.loader.params import parse_override

    out: dict[str, Any] = {}
    for text in params or []:
        name, value = parse_override(text)
        out[name] = value
    return out


def schema_ref(out: Path | None) -> str:
    """The ``$schema`` of the written file: the installed schema, relative to ``out``."""
    from topo.cli.schema import installed_schema

    shipped = installed_schema()
    if not shipped.is_file():
        return DEFAULT_SCHEMA
    if out is None:  # written wherever stdout goes: an absolute URI works from anywhere
        return shipped.as_uri()
    try:
        return Path(os.path.relpath(shipped, out.resolve().parent)).as_posix()
    except ValueError:  # another drive
        return shipped.as_uri()


@app.command("export")
def export(
    builder: Annotated[
        str,
        typer.Argument(
            metavar="BUILDER",
            help="The Launchpad program builder, package.module:function, returning an "
            "lp.Program (import topo.launchpad as lp).",
            show_default=False,
        ),
    ],
    params: BuilderParams = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the YAML here (default: stdout).")
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Program seed of the exported file.")] = 0,
) -> None:
    """Write the topology YAML of a program built in Python.

    Calls BUILDER with the -p values as keyword arguments and writes the topology YAML of
    the program it returns. Exit 1 when part of it cannot be written declaratively."""
    from topo.cli.export_params import builder_uses
    from topo.export import build_program, export_doc, export_program

    try:
        kwargs = builder_params(params)
        with contextlib.redirect_stdout(sys.stderr):  # what the builder prints is not YAML
            compiled = build_program(builder, kwargs, seed=seed)
            export_doc(compiled.program)  # what cannot be exported is reported first
            uses = builder_uses(builder, kwargs, seed)
        shown = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        header = [f"Exported by `topo export` from {builder}({shown})."]
        if uses.paths:
            header.append(
                "The builder's parameters are params (-p NAME=VALUE): " + ", ".join(uses.paths)
            )
        exported = export_program(
            compiled.program,
            schema=schema_ref(out),
            header=header,
            params=uses.defaults,
            uses=uses.paths,
        )
    except TopoError as error:
        raise fail(error) from None
    if out is None:
        print(exported.text, end="")
    else:
        try:
            out.write_text(exported.text, encoding="utf-8")
        except OSError as exc:
            stderr.print(f"[red]error:[/red] cannot write {escape(str(out))}: {exc.strerror}")
            raise typer.Exit(1) from None
        stderr.print(f"wrote {escape(str(out))}")
    for name, reason in uses.left_out.items():
        stderr.print(
            f"note: parameter {escape(name)!r} is not a param of the file, its value is "
            f"written in: {escape(reason)}"
        )
    for new, origin in exported.renamed.items():
        stderr.print(
            f"note: the nodes of group {escape(origin)!r} built from another target than its "
            f"first node's are in group {escape(new)!r}"
        )
    if exported.seed_keys:
        stderr.print(
            "note: PRNG keys ("
            + escape(", ".join(exported.seed_keys))
            + ") are written ${seed.key}: topo derives a key per node from the program seed, "
            "so the values differ from the Python program's"
        )
