"""``topo apply RUN FILE``: change a running program into FILE's, as a plan first, then on
the program while it runs (``topo.supervisor.applier``): new nodes start, changed ones
restart a few at a time, removed ones stop, and every other node goes on untouched.

The file is loaded and compiled here; the launcher of the run computes the plan against
the program it runs (``topo diff RUN FILE`` shows the same plan), refuses what cannot be
changed live, and carries the rest out in the background while this command follows it
in ``<run_dir>/changes/<generation>.json``. Exit 0 when applied (or nothing to do, or a
dry run), 1 when refused or failed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from topo.cli.app import app
from topo.cli.common import ParamsOption, stderr, stdout
from topo.cli.operate import LogDirOption, RunArgument, pick_run, say

ASK_TIMEOUT_S = 120.0  # the launcher checks the new program's imports before it answers


@app.command("apply")
def apply(
    run: RunArgument,
    file: Annotated[
        Path,
        typer.Argument(help="The topology file the run is to run from now on.", show_default=False),
    ],
    params: ParamsOption = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show the plan and what refuses it; change nothing.")
    ] = False,
    max_unavailable: Annotated[
        int,
        typer.Option(
            "--max-unavailable",
            min=1,
            help="How many executables of a changed group restart at a time.",
        ),
    ] = 1,
    fresh: Annotated[
        bool,
        typer.Option(
            "--fresh",
            help="Restarted nodes start fresh (default: each keeps the state it had).",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the launcher's answer and the record as JSON.")
    ] = False,
    log_dir: LogDirOption = Path("runs"),
) -> None:
    """Change a running program into FILE's program.

    New nodes start, changed ones restart one at a time, removed ones stop, the others go
    on. Shows the plan; --dry-run changes nothing."""
    info = pick_run(run, log_dir)
    if not info.live:
        say(f"error: run {info.id} is not running ({info.state}): nothing to change", "red")
        raise typer.Exit(1)
    request = _request(file, params, dry_run, max_unavailable, _imports_here(info.backend))
    request["fresh"] = fresh
    from topo.runs.control import ControlError
    from topo.runs.control import request as ask

    try:
        socket_path = info.status.get("control")
        if not socket_path:
            raise ControlError("the run has no control socket")
        answer = ask(info.run_dir, str(socket_path), request, timeout=ASK_TIMEOUT_S)
    except ControlError as exc:
        say(f"error: {exc}", "red")
        raise typer.Exit(1) from None
    if "plan_text" not in answer:
        say(f"error: run {info.id} did not take the change: {answer.get('error')}", "red")
        raise typer.Exit(1)
    if not as_json:
        stdout.print(answer["plan_text"], highlight=False, markup=False, soft_wrap=True)
    if answer.get("refused"):
        _print_json(as_json, answer)
        say(f"error: this change cannot be applied to run {info.id} while it runs:", "red")
        for reason in answer["refused"]:
            say(f"  - {reason}", "red")
        raise typer.Exit(1)
    if answer.get("equal") or dry_run:
        _print_json(as_json, answer)
        if not as_json and dry_run and not answer.get("equal"):
            say("dry run: nothing changed")
        raise typer.Exit(0)
    record = _follow(info.run_dir, int(answer["generation"]), quiet=as_json)
    _print_json(as_json, {**answer, "record": record})
    raise typer.Exit(0 if record.get("result") == "applied" else 1)


def _imports_here(backend: str) -> bool:
    """Whether the run's nodes import their targets in this Python environment (not on
    other hosts): then FILE's targets are imported and arguments checked here first."""
    from topo.backends.base import BackendNotFound, backend_factory

    try:
        return bool(getattr(backend_factory(backend), "imports_here", True))
    except BackendNotFound:
        return False


def _request(
    file: Path, params: list[str] | None, dry_run: bool, max_unavailable: int, imports: bool
) -> dict[str, Any]:
    """The ``apply`` request: FILE compiled with the ``-p`` values, its targets imported
    and arguments checked where the nodes import them (exit 1 on a bad file)."""
    from topo.api import load
    from topo.diagnostics import TopoError, render_diagnostics
    from topo.ir import program_to_dict

    try:
        loaded = load(file, params or [], check_imports=imports)
    except TopoError as exc:
        render_diagnostics(exc.diagnostics, stderr)
        raise typer.Exit(1) from None
    return {
        "op": "apply",
        "program": program_to_dict(loaded.program),
        "topology": loaded.yaml_text,
        "file": str(file.resolve()),
        "params_given": list(params or []),
        "params": json.loads(json.dumps(loaded.spec.param_values, default=str)),
        "dry_run": dry_run,
        "max_unavailable": max_unavailable,
    }


def _follow(run_dir: Path, generation: int, quiet: bool = False) -> dict[str, Any]:
    """Show the change's steps as the launcher records them; the record once it ended."""
    from topo.runs.probe import probe
    from topo.supervisor.change_record import read_change

    shown = 0
    while True:
        record = read_change(run_dir, generation) or {}
        steps = record.get("steps", [])
        for step in steps[shown:]:
            if step["step"] != "program" and not quiet:
                say(f"✓ {step['text']}  ({step['at_s']:.2f}s)", "green")
        shown = len(steps)
        result = record.get("result")
        if result and result != "applying":
            if not quiet:
                took = f" in {record.get('took_s') or 0:.2f}s"
                style = "bold" if result == "applied" else "red"
                error = f": {record['error']}" if record.get("error") else ""
                say(f"change {generation} {result}{took}{error}", style)
            return record
        if not probe(run_dir).live:
            if not quiet:
                say(f"error: the run ended while change {generation} was applied", "red")
            return {**record, "result": "interrupted", "error": "the run ended"}
        time.sleep(0.1)


def _print_json(as_json: bool, data: dict[str, Any]) -> None:
    if as_json:
        print(json.dumps(data, indent=2, default=str))
