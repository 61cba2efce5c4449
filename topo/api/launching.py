"""``launch``, ``prepare`` and ``start``: the one way a run is made and started
(``topo.launch``, ``topo run``, ``lp.launch``). ``prepare`` builds the run's
``RunRequest`` once and hands it to a ``Launcher``."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topo.api.loading import ProgramSource, load, overrides
from topo.api.running import RunningProgram
from topo.backends.rotation import DEFAULT_LOG_KEEP, DEFAULT_LOG_MAX_MB
from topo.ir import Program

if TYPE_CHECKING:
    from topo.backends.base import Backend, Event
    from topo.rundir.snapshots import Snapshot
    from topo.supervisor.launcher import Launcher


def launch(
    program_or_path: ProgramSource,
    backend: str | Backend = "threads",
    params: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    grace_s: float | None = None,
    log_dir: str | Path = "runs",
    run_dir: str | Path | None = None,
    log_max_mb: float | None = DEFAULT_LOG_MAX_MB,
    log_keep: int = DEFAULT_LOG_KEEP,
    metrics_to: Sequence[str] | str = (),
    metrics_port: int | None = None,
    disable_run: bool = False,
    ready_timeout: float | None = None,
    backend_options: Mapping[str, Any] | None = None,
    listeners: Sequence[Callable[[Event], None]] = (),
    start_from: str | Path | Snapshot | None = None,
) -> RunningProgram:
    """Start a program (a compiled ``Program``, a topology file, or a function making the
    ``Program``) and return at once.

    ``backend`` is a name (with ``backend_options`` for it) or a ``Backend`` object. It
    is ``threads`` unless given, where ``topo run`` uses ``procs``: called from Python,
    topo is most often a test or a notebook driving nodes through handles (Launchpad's
    ``launch_type='test_mt'``), which threads start at once and a debugger steps into;
    give ``backend="procs"`` for a process per executable as ``topo run`` does.
    ``disable_run`` serves courier nodes without calling their ``run()`` (for tests that
    drive nodes through handles). With ``ready_timeout`` wait that long for every node
    to be up (``TimeoutError`` otherwise). ``listeners`` get every event from the start
    (status changes, node log lines). ``start_from`` (a snapshot directory,
    ``<run_dir>/snapshots/<n>``, or a ``Snapshot``): every node with a state there starts
    from it. Each node log file is rotated past ``log_max_mb`` MiB, ``log_keep`` rotated
    files kept (``log_max_mb`` None or 0: no cap). ``metrics_to``: the nodes' metric rows
    also as ``csv`` and/or ``tensorboard`` files in the run directory. ``metrics_port``:
    the launcher serves every node's metrics and topo's own at ``/metrics`` on
    127.0.0.1 (0: any free port; ``status.json`` names it, ``metrics.token`` in the run
    directory is the bearer token a scrape needs). A program the backend cannot run
    raises ``topo.diagnostics.TopoError`` before anything starts."""
    launcher = prepare(
        program_or_path,
        backend,
        params,
        grace_s=grace_s,
        log_dir=log_dir,
        run_dir=run_dir,
        log_max_mb=log_max_mb,
        log_keep=log_keep,
        metrics_to=metrics_to,
        metrics_port=metrics_port,
        disable_run=disable_run,
        backend_options=backend_options,
        start_from=start_from,
    )
    return start(launcher, listeners, ready_timeout)


def prepare(
    source: ProgramSource,
    backend: str | Backend = "threads",
    params: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    grace_s: float | None = None,
    log_dir: str | Path = "runs",
    run_dir: str | Path | None = None,
    log_max_mb: float | None = DEFAULT_LOG_MAX_MB,
    log_keep: int = DEFAULT_LOG_KEEP,
    metrics_to: Sequence[str] | str = (),
    metrics_port: int | None = None,
    disable_run: bool = False,
    backend_options: Mapping[str, Any] | None = None,
    argv: Sequence[str] | None = None,
    from_run: str | Path | None = None,
    check_imports: bool = False,
    start_from: str | Path | Snapshot | None = None,
    same_program: bool = False,
) -> Launcher:
    """Make a run ready to start: the one way ``topo.launch``, ``topo run`` and
    ``lp.launch`` do it. The backend (by name with its options, or given) warms up while
    the program is loaded from the file or made by ``source()``; the launcher is checked
    (a program the backend cannot run raises ``TopoError``) and not started. With
    ``check_imports`` (``topo run``) a topology file's targets are imported here and each
    node's arguments bound to its target's signature first, as ``topo validate
    --check-imports`` does: a wrong argument name is a ``TopoError`` at its line, not a
    node failing after the start. If any step fails, what the warm-up started is closed.
    The run directory's ``run.json`` records how the run was started: ``argv`` (default:
    ``sys.argv``) and, for ``topo run --from``, the run directory ``from_run`` it reruns.
    ``start_from``: a snapshot every node with a saved state starts from; it must fit
    the program (``same_program``: be of this very program, as ``--resume`` asks), else
    ``topo.rundir.snapshots.SnapshotError`` says what differs and nothing starts. It is
    read and checked here once: the run starts from the snapshot checked.

    All of it goes to the launcher as one ``topo.supervisor.run_request.RunRequest``."""
    import topo
    from topo.backends.base import RunOptions
    from topo.rundir.record import git_lookup, make_record
    from topo.supervisor.launcher import Launcher
    from topo.supervisor.run_request import RunRequest

    if params and not isinstance(source, str | Path):
        raise ValueError("params apply to a topology file, not to a Program")
    chosen = _backend(backend, backend_options)
    # procs: the fork server starts importing now, while the program is compiled.
    warm = not isinstance(source, Program) and chosen.warm_up()
    git = git_lookup(source if isinstance(source, str | Path) else None)  # while it compiles
    try:
        guard = chosen.guard()
        resumed = None
        if guard is not None and run_dir is not None:
            # a requeued job: its run's newest snapshot (over the one it started from,
            # --resume/--fork, which its script still names)
            resumed = guard.resumed(Path(run_dir))
            if resumed is not None and resumed.snapshot is not None:
                start_from, same_program = resumed.snapshot, True
        ran = None if resumed is None else _as_it_ran(Path(run_dir or "."), source)
        if ran is not None:  # (run_dir is not None: resumed says so)
            source, params = ran.topology, ran.params_given
        made = _made(source, params, chosen if check_imports else None, warm)
        if ran is not None:
            made = replace(made, file=ran.file)
        snapshot = None if start_from is None else _fitting(made.program, start_from, same_program)
        options = RunOptions(
            grace_s=grace_s,
            log_dir=Path(log_dir),
            run_dir=None if run_dir is None else Path(run_dir),
            disable_run=disable_run,
            topology_yaml=made.yaml_text,
            log_max_mb=log_max_mb,
            log_keep=log_keep,
            metrics_to=_formats(metrics_to),
            metrics_port=metrics_port,
        )
        record = make_record(
            backend=chosen.name,
            backend_options=backend_options,
            file=made.file,
            params_given=overrides(params),
            params=made.params,
            grace_s=options.grace_s,
            log_dir=options.log_dir,
            log_max_mb=options.log_max_mb,
            log_keep=options.log_keep,
            disable_run=options.disable_run,
            argv=argv,
            from_run=from_run,
            git=git,
            topo_version=topo.__version__,
            metrics_to=options.metrics_to,
        )
        return Launcher(RunRequest(made.program, chosen, options, record, snapshot, guard, resumed))
    except BaseException:  # a bad program: what the warm-up started ends here
        if warm:
            chosen.close()
        raise


@dataclass(frozen=True)
class _Made:
    """The program a run was asked for, and the file it came from (if any)."""

    program: Program
    file: str | Path | None = None
    params: Mapping[str, Any] = field(default_factory=dict)  # their resolved values
    yaml_text: str | None = None  # the topology as it runs (topology.yaml)


def _made(
    source: ProgramSource,
    params: Mapping[str, Any] | Sequence[str] | None,
    checked_on: Backend | None,
    warm: bool,
) -> _Made:
    """The program of ``source`` (a topology file is loaded with ``params``). With
    ``checked_on`` (``topo run``) a file's targets import and each node's arguments bind
    to them, imported where that backend's nodes import them when it is ``warm`` (procs:
    its fork server), not in the launcher."""
    if isinstance(source, Program):
        return _Made(source)
    if not isinstance(source, str | Path):
        return _Made(source())
    loaded = load(source, params)
    program = loaded.program
    if checked_on is not None:
        from topo.compile.checks import check_imports, checked_targets

        targets = checked_targets(program, loaded.spec)
        found = checked_on.describe_targets(targets, program.source) if warm else None
        here = checked_on.imports_here
        check_imports(program, loaded.spec, imports_here=here, described=found)
    return _Made(program, source, loaded.spec.param_values, loaded.yaml_text)


@dataclass(frozen=True)
class _Ran:
    """The program a run ran when its job stopped, as its run directory keeps it."""

    topology: Path  # RUN_DIR/topology.yaml: the text of the file it ran
    file: str  # that file, where it was
    params_given: list[str]  # -p NAME=VALUE as given (or as topo apply changed them)


def _as_it_ran(run_dir: Path, source: ProgramSource) -> _Ran | None:
    """A requeued job's run goes on with the program it ran when it stopped: ``topo
    apply`` may have changed it since the job was submitted (``run.json``'s file and
    parameters, ``topology.yaml``'s text), while the job's script still names what was
    submitted. None: the run directory does not say (a program made in Python), or the
    run's source is not a file."""
    from topo.rundir.layout import TOPOLOGY_FILE
    from topo.rundir.record import RecordError, read_record

    if not isinstance(source, str | Path):
        return None
    try:
        record = read_record(run_dir)
    except RecordError:
        return None
    topology = run_dir / TOPOLOGY_FILE
    if record.file is None or not topology.is_file():
        return None
    return _Ran(topology, record.file, list(record.params_given))


def _fitting(program: Program, start_from: str | Path | Snapshot, same_program: bool) -> Snapshot:
    """The snapshot ``start_from`` names, read once and checked against ``program``
    (``SnapshotError`` otherwise), with its path resolved: ``runs/latest`` moves to the
    new run once its directory is made, and the nodes read their states from it later."""
    from topo.snapshots.fit import check_fit

    snapshot = check_fit(program, start_from, same_program=same_program)
    return replace(snapshot, path=snapshot.path.resolve())


def start(
    launcher: Launcher,
    listeners: Sequence[Callable[[Event], None]] = (),
    ready_timeout: float | None = None,
) -> RunningProgram:
    """Start a prepared launcher, ``listeners`` getting every event from the start; with
    ``ready_timeout`` wait that long for every node to be up (``TimeoutError``)."""
    for listener in listeners:
        launcher.add_listener(listener)
    launcher.start()
    running = RunningProgram(launcher)
    if ready_timeout is not None and not running.wait_ready(ready_timeout):
        if not launcher.done:
            running.stop()
            raise TimeoutError(
                f"program {launcher.program.name!r}: not every node was up after {ready_timeout:g}s"
            )
    return running


def _backend(backend: str | Backend, options: Mapping[str, Any] | None) -> Backend:
    """The backend to run on: the one given, or a new one of that name."""
    from topo.backends.base import get_backend

    if not isinstance(backend, str):
        if options:
            raise ValueError("backend_options apply to a backend given by name")
        return backend
    return get_backend(backend, **dict(options or {}))


def _formats(asked: Sequence[str] | str) -> tuple[str, ...]:
    """``metrics_to`` checked (``metrics_out.checked_formats``), named in its error."""
    from topo.supervisor.metrics_out import checked_formats

    try:
        return checked_formats(asked)
    except ValueError as exc:
        raise ValueError(f"metrics_to: {exc}") from None
