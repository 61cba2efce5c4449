"""``topo graph``: draw a topology as DOT, Mermaid, SVG/PNG (via Graphviz) or a terminal tree."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from topo.cli.app import app
from topo.cli.common import FileArgument, ParamsOption, load_program, stderr, stdout
from topo.ir import Program

SUFFIXES = {".dot": "dot", ".gv": "dot", ".mmd": "mermaid", ".svg": "svg", ".png": "png"}


def _load(file: Path, params: list[str] | None) -> Program:
    """A YAML topology through the compiler, or an IR JSON file (``topo plan --json``)."""
    if file.suffix == ".json":
        from topo.ir import loads

        try:
            return loads(file.read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            stderr.print(f"[red]error:[/] {escape(f'{file}: not a topo IR JSON file ({exc})')}")
            raise typer.Exit(1) from None
    return load_program(file, params)


def _choose(
    dot: bool, mermaid: bool, svg: Path | None, png: Path | None, out: Path | None
) -> tuple[str, Path | None]:
    """The output format and file (None: stdout) from the flags; a usage error (exit 2) when
    they clash."""
    picked: list[tuple[str, Path | None]] = []
    if dot:
        picked.append(("dot", None))
    if mermaid:
        picked.append(("mermaid", None))
    if svg is not None:
        picked.append(("svg", svg))
    if png is not None:
        picked.append(("png", png))
    if out is not None:
        fmt = SUFFIXES.get(out.suffix.lower())
        if fmt is None:
            raise typer.BadParameter(
                f"cannot tell the format of {out.name!r}; use one of {', '.join(sorted(SUFFIXES))}",
                param_hint="--out",
            )
        if any(f != fmt or p is not None for f, p in picked):
            raise typer.BadParameter(
                f"{out.name!r} means {fmt}, which clashes with the other format flags",
                param_hint="--out",
            )
        return fmt, out
    if len(picked) > 1:
        names = ", ".join(f"--{f}" for f, _ in picked)
        raise typer.BadParameter(f"choose one output format, not {names}")
    return picked[0] if picked else ("tree", None)


@app.command("graph")
def graph(
    file: FileArgument,
    params: ParamsOption = None,
    dot: Annotated[bool, typer.Option("--dot", help="Print Graphviz DOT.")] = False,
    mermaid: Annotated[
        bool, typer.Option("--mermaid", help="Print a Mermaid flowchart (GitHub Markdown).")
    ] = False,
    svg: Annotated[
        Path | None, typer.Option("--svg", metavar="OUT", help="Write SVG via Graphviz dot.")
    ] = None,
    png: Annotated[
        Path | None, typer.Option("--png", metavar="OUT", help="Write PNG via Graphviz dot.")
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", "-o", metavar="FILE", help="Write to FILE; format from .dot .mmd .svg .png."
        ),
    ] = None,
    expand: Annotated[
        bool, typer.Option("--expand", help="Draw every replica; collapse nothing.")
    ] = False,
    collapse_above: Annotated[
        int,
        typer.Option(
            "--collapse-above",
            metavar="N",
            min=0,
            help="Collapse groups of more than N replicas into one box (0: all).",
        ),
    ] = 8,
    group: Annotated[
        str | None,
        typer.Option("--group", "-g", metavar="G", help="Draw group G and its neighbours only."),
    ] = None,
    show_disabled: Annotated[
        bool,
        typer.Option("--show-disabled", help="Show disabled and empty groups, greyed."),
    ] = False,
) -> None:
    """Draw the topology as a graph.

    Groups are clusters, colocated nodes are boxed together, handles are edges."""
    from topo.render import (
        GraphvizError,
        UnknownGroupError,
        ViewOptions,
        build_view,
        render,
        to_dot,
        to_mermaid,
        to_tree,
    )

    fmt, target = _choose(dot, mermaid, svg, png, out)
    program = _load(file, params)
    options = ViewOptions(
        expand=expand, collapse_above=collapse_above, focus=group, show_disabled=show_disabled
    )
    try:
        view = build_view(program, options)
    except UnknownGroupError as exc:
        stderr.print(
            f"[red]error:[/] no group named [bold]{escape(exc.name)}[/] in {escape(program.name)}"
        )
        stderr.print("groups: " + escape(", ".join(exc.groups)))
        raise typer.Exit(1) from None

    if fmt == "tree":
        stdout.print(to_tree(view))
        return
    text = to_dot(view) if fmt in ("dot", "svg", "png") else to_mermaid(view)
    if fmt in ("svg", "png"):
        try:
            data = render(text, fmt)
        except GraphvizError as exc:
            stderr.print(f"[red]error:[/] {escape(str(exc))}")
            raise typer.Exit(1) from None
        if fmt == "png":
            _warn_if_scaled(data, expand)
    else:
        data = text.encode("utf-8")
    if target is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    except OSError as exc:
        stderr.print(f"[red]error:[/] {escape(f'cannot write {target}: {exc}')}")
        raise typer.Exit(1) from None
    stderr.print(
        f"wrote {escape(str(target))} ({fmt}: {len(view.nodes)} boxes, {len(view.edges)} edges "
        f"for {view.ir_nodes} nodes, {view.ir_edges} handles)"
    )


def _warn_if_scaled(png: bytes, expand: bool) -> None:
    """Say so when the PNG was shrunk to fit the size bound (labels may be unreadable)."""
    from topo.render.graphviz import PNG_MAX_PX, png_size, png_was_scaled

    if not png_was_scaled(png):
        return
    width, height = png_size(png)
    fix = "draw it with --svg" + (", or without --expand" if expand else "")
    stderr.print(
        f"[yellow]warning:[/] the drawing is larger than {PNG_MAX_PX:,} px, so the "
        f"PNG was scaled down to {width}×{height} px and its labels may be "
        f"unreadable; {fix}"
    )
