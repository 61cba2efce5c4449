"""``topo diff A B``: what changes from program A to program B, as a plan -- each of A and B a
topology file or a run (its recorded ``program.json``). A run compared with a file is
shown as ``topo apply`` would change it: the file compiled from the run's parameters
(``topo.cli.carried``), the run's processes kept where they can be.
Exit 0 when equal, 1 when they differ, 2 on trouble (``diff``'s convention)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from topo.cli.app import app
from topo.cli.carried import ResetParamsOption
from topo.cli.common import ParamsOption, error, stderr, stdout
from topo.diagnostics import TopoError, render_diagnostics
from topo.ir import Program
from topo.rundir.layout import PROGRAM_FILE

TROUBLE = 2  # a file or run that cannot be read: diff's "trouble" exit
OperandArgument = Annotated[
    str,
    typer.Argument(
        metavar="A",
        help="A topology YAML file, or a run: a run directory, runs/latest, a run id.",
        show_default=False,
    ),
]


@app.command("diff")
def diff(
    old: OperandArgument,
    new: Annotated[
        str,
        typer.Argument(metavar="B", help="The same, compared with A.", show_default=False),
    ],
    params: ParamsOption = None,
    reset_params: ResetParamsOption = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the diff as JSON (its shape: topo.ir.diff).")
    ] = False,
) -> None:
    """Compare two programs (files or runs) and print the changes.

    The changes print as a plan. Exit 0 when equal, 1 when they differ, 2 on trouble."""
    from topo.ir.diff import diff_programs
    from topo.ir.diff_printer import diff_to_dict, format_diff

    for_run = None
    if _is_file(old) != _is_file(new) and _run_of(new if _is_file(old) else old) is not None:
        # A run and a file: the file as `topo apply` would run it there, from the run's
        # parameters (and with the processes the run has kept where the new packing allows)
        from topo.cli.carried import load_for_run
        from topo.ir.packing import as_applied

        file, other = (Path(old), new) if _is_file(old) else (Path(new), old)
        run_id, run_dir = _run_of(other) or ("", Path())
        recorded = load_operand(other, None)
        for_run = load_for_run(file, run_dir, run_id, params, reset_params, TROUBLE)
        compiled = for_run.loaded.program
        if file == Path(new):
            before, after = recorded, as_applied(recorded, compiled)
        else:
            before, after = compiled, recorded
        for note in for_run.notes(file):
            stderr.print(note, highlight=False, markup=False)
    else:
        before, after = load_operand(old, params), load_operand(new, params)
    found = diff_programs(before, after)
    if as_json:
        data = diff_to_dict(found)
        if for_run is not None:
            data["params"] = for_run.as_json()
        print(json.dumps(data, indent=2))
    else:
        lines = [] if for_run is None else for_run.lines()
        text = "\n".join([*lines, format_diff(found)])
        stdout.print(text, highlight=False, markup=False, soft_wrap=True)
    raise typer.Exit(0 if found.equal else 1)


def _run_of(spec: str) -> tuple[str, Path] | None:
    """The id and directory of the run ``spec`` names; None for a recorded
    ``program.json`` or what names no run (``load_operand`` then says what it is)."""
    path = Path(spec)
    if path.is_file() or (path.is_dir() and not (path / PROGRAM_FILE).is_file()):
        return None
    from topo.runs.resolve import RunNotFound, resolve

    try:
        info = resolve(spec)
    except RunNotFound:
        return (path.name, path) if path.is_dir() else None
    return info.id, info.run_dir


def _is_file(spec: str) -> bool:
    """Whether ``spec`` names a topology file (not a run)."""
    path = Path(spec)
    return path.is_file() and path.suffix != ".json"


def load_operand(spec: str, params: list[str] | None) -> Program:
    """The program ``spec`` names: a topology file compiled with ``params``, a run's
    recorded program (a run directory, a ``program.json``, a run id), else exit 2."""
    path = Path(spec)
    if path.is_dir() and (path / PROGRAM_FILE).is_file():
        return _recorded(path / PROGRAM_FILE)
    if path.is_file():
        return _recorded(path) if path.suffix == ".json" else _compiled(path, params)
    if path.suffix in (".yaml", ".yml", ".json") or path.is_dir():
        missing = f"has no {PROGRAM_FILE}" if path.is_dir() else "does not exist"
        raise error(f"{spec}: {missing}", TROUBLE)
    from topo.runs.resolve import RunNotFound, resolve

    try:
        run_dir = resolve(spec).run_dir
    except RunNotFound as exc:
        if not str(exc).startswith("no run"):
            raise error(str(exc), TROUBLE) from None  # a prefix of several runs' ids
        raise error(
            f"no file or run {spec!r}: not a topology file, a run directory, a run id or an "
            "id prefix (`topo ps -a` lists the runs)",
            TROUBLE,
        ) from None
    if not (run_dir / PROGRAM_FILE).is_file():
        raise error(f"run {spec} ({run_dir}) has no {PROGRAM_FILE}", TROUBLE)
    return _recorded(run_dir / PROGRAM_FILE)


def _compiled(path: Path, params: list[str] | None) -> Program:
    from topo.api import load

    try:
        return load(path, params or []).program
    except TopoError as exc:
        render_diagnostics(exc.diagnostics, stderr)
        raise typer.Exit(TROUBLE) from None


def _recorded(path: Path) -> Program:
    from topo.ir import IRFormatError, loads

    try:
        return loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, IRFormatError) as exc:  # IRVersionError is a ValueError
        raise error(f"{path}: cannot read the recorded program: {exc}", TROUBLE) from None
