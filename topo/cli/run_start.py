"""``topo run``: from its options to a launcher ready to start.

``starting_point`` reads ``--from``/``--resume``/``--fork``/``--snapshot`` (a command line
that means nothing exits 2 before anything starts; a run or snapshot that is not there
exits 1) and finds the snapshot to start from; ``prepared`` makes the run request once
(``topo.api.prepare``: the program loaded and checked, the backend warmed up or taken
from the console script's early start, the snapshot checked against the program).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from topo.cli.common import USAGE_EXIT, error, fail
from topo.cli.run_options import Origin, Settings

if TYPE_CHECKING:
    from topo.backends.base import Backend
    from topo.cli.ui import Warm
    from topo.rundir.snapshots import Snapshot
    from topo.supervisor.launcher import Launcher


@dataclass(frozen=True)
class StartingPoint:
    """The run directory whose program runs again (``--from``, ``--resume``) and the
    snapshot the nodes start from (``--resume``, ``--fork``), read once."""

    rerun: Path | None
    snapshot: Snapshot | None


def starting_point(origin: Origin) -> StartingPoint:
    """What ``--from``, ``--resume``, ``--fork`` and ``--snapshot`` name. A command line
    that means nothing exits 2 (before anything starts or is detached); a run or a
    snapshot that is not there exits 1."""
    file, from_run, resume, fork = origin.file, origin.from_run, origin.resume, origin.fork
    given = [
        name for name, v in (("--from", from_run), ("--resume", resume), ("--fork", fork)) if v
    ]
    if len(given) > 1:
        raise error(f"give one of {', '.join(given)}, not several", USAGE_EXIT)
    if origin.snapshot is not None and not (resume or fork):
        raise error("--snapshot N goes with --resume RUN or --fork RUN", USAGE_EXIT)
    if file is None and not (from_run or resume):
        raise error(
            "missing FILE: --fork RUN starts FILE from RUN's snapshot"
            if fork
            else "missing FILE: give a topology file (or --from RUN to run a run's program "
            "again, --resume RUN to bring it back from its snapshot)",
            USAGE_EXIT,
        )
    if file is not None and resume is not None:
        raise error(
            f"--resume RUN brings back the program RUN ran (its own topology, parameters "
            f"and backend) and takes no FILE; to start {file} from RUN's snapshot, with its "
            "parameters, use --fork RUN",
            USAGE_EXIT,
        )
    if file is not None and from_run is not None:
        raise error(
            "give FILE or --from RUN, not both: --from runs again the topology kept in RUN "
            "(add -p NAME=VALUE to change its parameters)",
            USAGE_EXIT,
        )
    from topo.cli.rerun import run_dir_of

    if from_run is not None:
        return StartingPoint(run_dir_of(from_run), None)
    source = resume or fork
    if source is None:
        return StartingPoint(None, None)
    from topo.rundir.snapshots import SnapshotError, find

    run_dir = run_dir_of(source)
    try:
        snapshot = find(run_dir, origin.snapshot)
    except SnapshotError as exc:
        raise error(str(exc)) from None
    return StartingPoint(run_dir if resume is not None else None, snapshot)


def prepared(
    ctx: typer.Context,
    backend: str,
    origin: Origin,
    start: StartingPoint,
    settings: Settings,
    warm: Warm | None,
) -> Launcher:
    """The launcher of the run the command line asks for, not started: FILE (or the run
    directory ``--from``/``--resume`` names, its recorded options taken where none is
    given) loaded, its imports and node arguments checked, ``start``'s snapshot checked
    against it. A bad file, backend, option or snapshot exits 1 saying why (the
    dashboard ``warm`` is closed then: nothing runs)."""
    from topo.api import prepare
    from topo.backends.base import BackendNotFound, BackendOptionError
    from topo.cli.common import backend_options
    from topo.cli.rerun import rerun_of, warn_reused
    from topo.diagnostics import TopoError
    from topo.rundir.snapshots import SnapshotError

    file, params, run_options = origin.file, list(origin.params), settings
    rerun = rerun_of(file, start.rerun)  # --from / --resume RUN: its file and options
    if rerun is not None:
        file, run_options = rerun.file, rerun.settings(ctx, settings)
        # its -p values go on (topology.yaml holds them as defaults, and topo apply to
        # the new run starts from them), changed by the ones given now
        from topo.loader.params import merge_overrides

        params = merge_overrides(rerun.record.params_given, params)
    assert file is not None
    options = backend_options(ctx)
    try:  # procs: the fork server imports while the file is compiled
        launcher = prepare(
            file,
            _early(ctx, backend, options) or backend,
            params,
            backend_options=options,
            from_run=start.rerun,
            start_from=start.snapshot,
            same_program=origin.resume is not None,
            check_imports=True,  # imports and node arguments, before anything starts
            **asdict(run_options),  # grace_s, log_dir, run_dir, log_max_mb, log_keep
        )
    except BaseException as exc:
        if warm is not None:  # nothing runs: nor does the dashboard
            warm.close()
        if isinstance(exc, BackendNotFound | BackendOptionError | SnapshotError):
            raise error(str(exc)) from None  # (--resume / --fork: a snapshot that does not fit)
        if isinstance(exc, TopoError):  # a bad file or inventory, or a program refused
            raise fail(exc) from None
        raise
    from topo.backends.titles import set_title

    set_title(f"topo: run {launcher.program.name} ({backend})")
    if launcher.request.resumed is None:  # (a requeued job's run goes on in its directory)
        warn_reused(run_options.run_dir)
    return launcher


def _early(ctx: typer.Context, backend: str, options: dict[str, Any]) -> Backend | None:
    """The backend the console script warmed up before typer was imported
    (``topo.cli.early``), if the run is on it; None otherwise (one of another name or
    with options of its own ends now)."""
    from topo.cli.early import EarlyBackend

    early = ctx.find_object(EarlyBackend)
    return None if early is None else early.take(backend, options)
