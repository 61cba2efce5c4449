"""``topo schema``: print or write the JSON Schema of topology files."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from topo.cli.app import app
from topo.cli.common import stderr


@app.command("schema")
def schema(
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the schema to this file.")
    ] = None,
) -> None:
    """Print the JSON Schema of topology files (editors use it through the $schema modeline)."""
    from topo.spec.schema import schema_text

    text = schema_text()
    if out is None:
        print(text, end="")
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        stderr.print(f"[red]error:[/red] cannot write {out}: {exc.strerror}")
        raise typer.Exit(1) from None
    stderr.print(f"wrote {out}")
