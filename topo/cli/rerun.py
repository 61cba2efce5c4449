"""``topo run --from RUN``: run again the program a run directory kept (RUN: a run id,
an id prefix or a run directory, as every command takes it).

The run directory's ``topology.yaml`` (its ``-p`` values written as defaults) is the
file; its ``run.json`` gives the backend with its options and the run options
(grace, log directory, log caps), each overridden by the same option given on the
command line (``-p`` applies on top of the kept values).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import typer
from rich.text import Text

from topo.cli.common import USAGE_EXIT, error, stderr
from topo.cli.run_options import Settings
from topo.rundir.layout import TOPOLOGY_FILE, holds_run, reused_warning
from topo.rundir.record import (
    RecordError,
    RunRecord,
    git_state,
    named_run_dir,
    read_record,
    recorded_backend,
)

# a run option (``Settings``, as prepare() names it) -> topo run's parameter that gives it
_SETTINGS = {"grace_s": "grace", "log_dir": "log_dir", "log_max_mb": "log_max_mb"} | {
    "log_keep": "log_keep",
    "metrics_to": "metrics_to",
}


@dataclass(frozen=True)
class Rerun:
    """A run directory to run again: where it is, its record, its topology file."""

    run_dir: Path
    record: RunRecord
    file: Path

    def settings(self, ctx: typer.Context, given: Settings) -> Settings:
        """The run options: each as given on the command line, else as the run directory
        recorded."""
        recorded: dict[str, Any] = {}
        for key, param in _SETTINGS.items():
            source = ctx.get_parameter_source(param)  # typer's click: compared by name
            if source is None or source.name in ("DEFAULT", "DEFAULT_MAP"):
                value = getattr(self.record, key)
                if key == "log_dir":
                    value = Path(value)
                elif key == "metrics_to":
                    value = tuple(value)
                recorded[key] = value
        return replace(given, **recorded)


def run_dir_of(spec: Path) -> Path:
    """The run directory RUN names (``--from``, ``--resume``, ``--fork``: a run directory,
    a run id or an id prefix); exits 1 when it names no run. A directory is taken as it
    is: what it lacks (a record, a snapshot) is said where it is needed."""
    from topo.runs.resolve import RunNotFound, resolve

    if spec.is_dir():
        return spec
    try:
        return resolve(str(spec)).run_dir
    except RunNotFound as exc:
        raise error(str(exc)) from None


def rerun_of(file: Path | None, from_run: Path | None) -> Rerun | None:
    """The run ``--from`` names (None without it, a run directory); exits 2 when the
    command line is wrong, 1 saying why when the directory cannot be rerun."""
    if from_run is None:
        if file is None:
            raise error(
                "missing FILE: give a topology file, or --from RUN to rerun a run", USAGE_EXIT
            )
        return None
    if file is not None:
        raise error(
            f"give FILE or --from RUN, not both: --from reruns the topology kept in "
            f"{from_run}/{TOPOLOGY_FILE} (add -p NAME=VALUE to change its parameters)",
            USAGE_EXIT,
        )
    try:
        record = read_record(from_run)
    except RecordError as exc:
        raise error(f"cannot rerun {from_run}: {exc}") from None
    topology = from_run / TOPOLOGY_FILE
    if not topology.is_file():
        raise error(
            f"cannot rerun {from_run}: it has no {TOPOLOGY_FILE} (its program was made in "
            "Python, not loaded from a topology file)"
        )
    _compare(record)
    return Rerun(from_run, record, topology)


def _warn(text: str) -> None:
    stderr.print(Text(f"warning: {text}", style="yellow"))


def _compare(record: RunRecord) -> None:
    """Warn about what differs from when the run was recorded: the working directory
    (node imports and relative paths are resolved from it) and the project's commit."""
    here = str(Path.cwd())
    if record.cwd != here:
        _warn(
            f"the run was started in {record.cwd}: node targets are imported and relative "
            f"paths resolved from {here} now"
        )
    if record.git is not None:
        now = git_state(Path(record.git.root))
        if now is not None and now.commit != record.git.commit:
            _warn(
                f"{record.git.root} is at commit {now.commit[:12]} now; the run was at "
                f"{record.git.commit[:12]}"
            )


def warn_reused(run_dir: Path | None) -> None:
    """Say so before the start when ``--run-dir`` names a directory holding a run."""
    if run_dir is not None and holds_run(run_dir):
        _warn(reused_warning(run_dir))


def recorded_preset(args: Sequence[str], default: str | None) -> tuple[str | None, dict[str, Any]]:
    """The backend ``topo run`` uses when ``-b`` is not given (the one the run directory
    of ``--from`` recorded, else ``default``) and the option values recorded for it."""
    named = named_run_dir(args)
    run_dir = None if named is None else _quietly_resolved(named)
    found = None if run_dir is None else recorded_backend(run_dir)
    if found is None:
        return default, {}
    return found


def _quietly_resolved(spec: str) -> Path | str:
    """The run directory RUN names, or ``spec`` itself (what is wrong with it is said
    once the command line is parsed)."""
    from topo.runs.resolve import RunNotFound, resolve

    if Path(spec).is_dir():
        return spec
    try:
        return resolve(spec).run_dir
    except RunNotFound:
        return spec
