"""``topo schema``: print or write the JSON Schema of topology files, or say where the
installed copy is (for a ``# yaml-language-server: $schema=...`` line)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

import topo
from topo.cli.app import app
from topo.cli.common import stderr


def installed_schema() -> Path:
    """The schema file shipped inside the installed package (``topo/schema/``)."""
    return Path(topo.__file__).resolve().parent / "schema" / "topology.schema.json"


@app.command("schema")
def schema(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the schema to this file.")
    ] = None,
    path: Annotated[
        bool, typer.Option("--path", help="Print the path of the installed schema file.")
    ] = False,
    uri: Annotated[
        bool, typer.Option("--uri", help="Print the installed schema file as a file:// URI.")
    ] = False,
) -> None:
    """Print the JSON Schema of topology files.

    Editors use it through the $schema modeline of a topology file."""
    from topo.loader.schema import schema_text

    if path or uri:
        shipped = installed_schema()
        if not shipped.is_file():
            stderr.print(
                f"[red]error:[/red] the schema is missing from this installation "
                f"({escape(str(shipped))}); reinstall topo"
            )
            raise typer.Exit(1)
        print(shipped.as_uri() if uri else shipped)
        return
    text = schema_text()
    if out is None:
        print(text, end="")
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        stderr.print(f"[red]error:[/red] cannot write {escape(str(out))}: {exc.strerror}")
        raise typer.Exit(1) from None
    stderr.print(f"wrote {escape(str(out))}")
