"""``RUN`` on the command line -> a run directory: a run id, a unique prefix of one, a
run directory, or nothing for the latest run started from here (``runs/latest``)."""

from __future__ import annotations

from pathlib import Path

from topo.rundir.layout import STATUS_FILE
from topo.runs import index
from topo.runs.probe import RunInfo, probe
from topo.runs.slurm_jobs import JOB_FILE


def _holds_run(path: Path) -> bool:
    """A run directory: its launcher's record, or a submitted job's (not started yet)."""
    return (path / STATUS_FILE).exists() or (path / JOB_FILE).exists()


class RunNotFound(Exception):
    """``RUN`` names no run, or more than one: the message says which and what to do."""


def resolve(spec: str | None, log_dir: Path = Path("runs")) -> RunInfo:
    """The run ``spec`` names (see the module docstring)."""
    if not spec:
        latest = log_dir / index.LATEST
        if not _holds_run(latest):
            raise RunNotFound(
                f"no run was started from here ({latest} does not exist); name one: "
                "`topo ps -a` lists the runs"
            )
        return _with_id(latest.resolve())
    path = Path(spec)
    if _holds_run(path):
        return _with_id(path.resolve())
    listed = index.entries()
    exact = [(i, d) for i, d in listed if i == spec]
    matches = exact or [(i, d) for i, d in listed if i.startswith(spec)]
    if not matches:  # a run directory's name works too (as `ls runs` shows it)
        matches = [(i, d) for i, d in listed if d.name == spec]
    if len(matches) == 1:
        run_id, run_dir = matches[0]
        return probe(run_dir, run_id)
    if not matches:
        raise RunNotFound(
            f"no run {spec!r}: not a run id, an id prefix or a run directory "
            "(`topo ps -a` lists the runs)"
        )
    shown = ", ".join(sorted(i for i, _ in matches)[:6])
    raise RunNotFound(f"{spec!r} names {len(matches)} runs ({shown}); give more of the id")


def _with_id(run_dir: Path) -> RunInfo:
    for run_id, listed in index.entries():
        if listed == run_dir:
            return probe(run_dir, run_id)
    return probe(run_dir)
