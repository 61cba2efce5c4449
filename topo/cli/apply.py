"""``topo apply RUN FILE``: change a running program into FILE's, as a plan first, then on
the program while it runs (``topo.supervisor.applier``): new nodes start, changed ones
restart a few at a time, removed ones stop, and every other node goes on untouched.

FILE is compiled here from the run's parameters (``topo.cli.carried``: the run's ``-p``
values, changed by this command's) without importing any target: the run's launcher
imports them where the nodes do (procs: its fork server, which has them already) and
describes them, and this command checks the nodes' arguments against that, so an error
comes back at file:line:col and the command never loads TensorFlow or JAX. The launcher
computes the plan against the program it runs (``topo diff RUN FILE`` shows the same
plan), refuses what cannot be changed live, holds back what would stop the program or
lose work until it is confirmed (``--yes``, or y at the prompt on a terminal), and
carries the rest out in the background while this command follows it in
``<run_dir>/changes/<generation>.json``. Exit 0 when applied (or nothing to do, or a
dry run), 1 when refused, not confirmed or failed.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from topo.cli.app import app
from topo.cli.carried import ForRun, ResetParamsOption, load_for_run
from topo.cli.common import ParamsOption, stderr, stdout
from topo.cli.operate import LogDirOption, ask_launcher, pick_run, require_live, say

if TYPE_CHECKING:
    from topo.runs.resolve import RunInfo

ASK_TIMEOUT_S = 120.0  # the launcher imports the new program's targets before it answers


@app.command("apply")
def apply(
    run: Annotated[
        str,
        typer.Argument(
            metavar="RUN",
            help="The run to change: its id, a unique id prefix or its run directory.",
            show_default=False,
        ),
    ],
    file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE",
            help="The topology file the run is to run from now on.",
            show_default=False,
        ),
    ],
    params: ParamsOption = None,
    reset_params: ResetParamsOption = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            "-y",
            help="Apply a change that would stop the program or lose work without asking.",
        ),
    ] = False,
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
    require_live(info, "nothing to change")
    for_run = load_for_run(file, info.run_dir, info.id, params, reset_params, 1)
    for note in for_run.notes(file):
        say(note, "yellow")
    _check_arguments(info, for_run)
    request = _request(file, for_run, dry_run, max_unavailable)
    request.update(fresh=fresh, confirmed=yes)
    answer = {**_ask(info, request), "params": for_run.as_json()}
    if not as_json:
        text = "\n".join([*for_run.lines(), answer["plan_text"]])
        stdout.print(text, highlight=False, markup=False, soft_wrap=True)
    if answer.get("refused"):
        _print_json(as_json, answer)
        say(f"error: this change cannot be applied to run {info.id} while it runs:", "red")
        for reason in answer["refused"]:
            say(f"  - {reason}", "red")
        raise typer.Exit(1)
    risks = list(answer.get("confirm") or [])
    if risks and not as_json:
        say("This change would stop the program or lose work:", "yellow")
        for reason in risks:
            say(f"  - {reason}", "yellow")
    if risks and answer.get("generation") is None and not dry_run:
        if as_json or not _confirmed_here(info):
            _print_json(as_json, answer)
            say(
                f"error: not applied to run {info.id}: confirm it with --yes (-y), or answer "
                "y when topo apply asks on a terminal",
                "red",
            )
            raise typer.Exit(1)
        again = {**request, "confirmed": True, "expect": answer.get("digest")}
        answer = {**_ask(info, again), "params": for_run.as_json()}
        if answer.get("refused"):
            say(f"error: not applied: {'; '.join(answer['refused'])}", "red")
            raise typer.Exit(1)
    if answer.get("equal") or dry_run:
        _print_json(as_json, answer)
        if not as_json and dry_run and not answer.get("equal"):
            say("dry run: nothing changed")
        raise typer.Exit(0)
    if answer.get("generation") is None:  # (nothing refused or to confirm, yet not begun)
        say(f"error: run {info.id} did not begin the change: {answer.get('error')}", "red")
        raise typer.Exit(1)
    record = _follow(info.run_dir, int(answer["generation"]), quiet=as_json)
    _print_json(as_json, {**answer, "record": record})
    raise typer.Exit(0 if record.get("result") == "applied" else 1)


def _ask(info: RunInfo, request: dict[str, Any]) -> dict[str, Any]:
    """The launcher's answer to ``request`` (exit 1 saying why when there is none)."""
    answer = ask_launcher(info, request, ASK_TIMEOUT_S)
    if request["op"] == "apply" and "plan_text" not in answer:
        say(f"error: run {info.id} did not take the change: {answer.get('error')}", "red")
        raise typer.Exit(1)
    return answer


def _check_arguments(info: RunInfo, for_run: ForRun) -> None:
    """FILE's targets imported by the run's launcher where its nodes import them, and each
    node's arguments checked against them here (exit 1, at file:line:col, when one is
    wrong). A launcher of an older topo that cannot describe them: imported here."""
    from topo.compile.checks import check_imports, checked_targets
    from topo.diagnostics import TopoError, render_diagnostics
    from topo.targets import TargetInfo

    loaded = for_run.loaded
    program = loaded.program
    targets = checked_targets(program, loaded.spec)
    answer = _ask(info, {"op": "describe", "targets": targets, "source": program.source})
    found = answer.get("targets")
    try:
        if isinstance(found, dict):
            described = {
                t: v if isinstance(v, str) else TargetInfo.from_json(v) for t, v in found.items()
            }
            imports_here = bool(answer.get("imports_here", True))
            check_imports(program, loaded.spec, imports_here=imports_here, described=described)
        else:
            check_imports(program, loaded.spec, imports_here=_imports_here(info.backend))
    except TopoError as exc:
        render_diagnostics(exc.diagnostics, stderr)
        raise typer.Exit(1) from None


def _imports_here(backend: str) -> bool:
    """Whether the run's nodes import their targets in this Python environment."""
    from topo.backends.base import BackendNotFound, backend_factory

    try:
        return bool(getattr(backend_factory(backend), "imports_here", True))
    except BackendNotFound:
        return False


def _confirmed_here(info: RunInfo) -> bool:
    """On a terminal: the user's y to the prompt; elsewhere False (nobody to ask)."""
    if not sys.stdin.isatty():
        return False
    try:
        answer = input(f"Apply it to run {info.id} anyway? [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def _request(file: Path, for_run: ForRun, dry_run: bool, max_unavailable: int) -> dict[str, Any]:
    """The ``apply`` request: FILE's program, its text, and its parameters as the run's
    record is to hold them."""
    from topo.ir import program_to_dict

    loaded = for_run.loaded
    return {
        "op": "apply",
        "program": program_to_dict(loaded.program),
        "topology": loaded.yaml_text,
        "file": str(file.resolve()),
        "params_given": list(loaded.spec.given),
        "params": json.loads(json.dumps(loaded.spec.param_values, default=str)),
        "params_change": for_run.as_json(),
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
