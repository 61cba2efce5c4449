"""topo's Python API: ``load`` a topology, ``launch`` a program, talk to its nodes.

The counterpart of Launchpad's ``launch_type='test_mt'``::

    with topo.launch("examples/topologies/consumer_producers.yaml", disable_run=True) as run:
        assert run.handle("producer/0").work(3) >= 0

``load`` is also what every CLI command loads a file with. This module imports
the runtime (zmq) only when a program is launched, so loading stays light.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topo.backends.rotation import DEFAULT_LOG_KEEP, DEFAULT_LOG_MAX_MB
from topo.diagnostics import Diagnostic
from topo.ir import Program

if TYPE_CHECKING:
    from topo.backends.base import Backend, Event
    from topo.loader import LoadedSpec
    from topo.runtime import Handle, ProgramContext
    from topo.snapshots.store import Snapshot
    from topo.supervisor.change_plan import LivePlan
    from topo.supervisor.launcher import Launcher
    from topo.supervisor.state import Failure, NodeStatus


ProgramSource = Program | str | Path | Callable[[], Program]


def _overrides(params: Mapping[str, Any] | Sequence[str] | None) -> list[str]:
    if params is None:
        return []
    if isinstance(params, Mapping):
        return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in params.items()]
    return list(params)


class Loaded:
    """A loaded topology: the compiled ``program`` and, made when first asked for, the
    YAML text the run directory keeps as ``topology.yaml``."""

    def __init__(
        self, program: Program, spec: LoadedSpec, warnings: list[Diagnostic] | None = None
    ) -> None:
        self.program = program
        self.spec = spec  # what the file said: parameters with their help and overrides
        self.warnings = warnings or []  # e.g. a node nothing reaches (--check-imports)

    @functools.cached_property
    def yaml_text(self) -> str:
        """The topology as it runs, as YAML: the file (its bases merged in), each ``-p``
        value written as its parameter's default (``topo.loader.saved``)."""
        from topo.loader.saved import saved_yaml

        return saved_yaml(self.spec)


def load(
    path: str | Path,
    params: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    check_imports: bool = False,
    carried: Sequence[str] | None = None,
) -> Loaded:
    """Load, interpolate and compile a topology file (the one load path of the API and
    every CLI command).

    ``params`` are overrides (``{"num_actors": 8}`` or ``["num_actors=8"]``); with
    ``check_imports`` every target must import. ``carried``: ``-p`` values from before
    (a running program's) that ``params`` change by name; one the file does not declare
    is dropped (``spec.dropped``). Raises ``topo.diagnostics.TopoError`` on a bad file."""
    from topo.compile import compile_spec
    from topo.loader import load_spec

    loaded = load_spec(Path(path), _overrides(params), list(carried or []))
    warnings: list[Diagnostic] = []
    program = compile_spec(loaded, check_imports=check_imports, warnings=warnings)
    return Loaded(program, loaded, warnings)


class ApplyRefused(ValueError):
    """A change that cannot be applied to the running program (``reasons`` say why);
    nothing was changed."""

    def __init__(self, reasons: list[str]) -> None:
        super().__init__("; ".join(reasons))
        self.reasons = reasons


class ApplyNeedsConfirmation(ApplyRefused):
    """A change that would stop the program or lose work (``reasons`` say how), refused
    because it was not confirmed (``confirm=True``); nothing was changed."""


class Change:
    """What ``RunningProgram.apply`` did: the ``plan``, the change's ``generation`` (None:
    a dry run, or nothing to do) and its ``record`` (``changes/<generation>.json``)."""

    def __init__(self, plan: LivePlan, generation: int | None, record: dict[str, Any] | None):
        self.plan = plan
        self.generation = generation
        self.record = record

    @property
    def result(self) -> str:
        """``applied``, ``failed``, ``interrupted``, ``applying`` (still, at the timeout),
        or ``planned`` (a dry run, or nothing to do)."""
        if self.record is None:
            return "planned" if self.generation is None else "applying"
        return str(self.record.get("result"))


class RunningProgram:
    """A started program: handles to its nodes, wait, stop, kill. A context manager."""

    def __init__(self, launcher: Launcher) -> None:
        self.launcher = launcher
        self._client: ProgramContext | None = None

    @property
    def program(self) -> Program:
        """The compiled program being run."""
        return self.launcher.program

    @property
    def run_dir(self) -> Path:
        """This run's directory (logs, program.json, status.json)."""
        return self.launcher.state.run_dir

    @property
    def exit_code(self) -> int | None:
        """None while running; then 0 clean stop, 1 failure, 130 Ctrl-C/kill."""
        return self.launcher.state.exit_code if self.launcher.done else None

    @property
    def failure(self) -> Failure | None:
        """The node failure that ended the run, if any."""
        return self.launcher.state.failure

    def handle(self, node_id: str, timeout: float | None = None) -> Handle:
        """A client handle to ``node_id`` usable from this (non-node) thread."""
        if node_id not in self.program.node_index:
            raise KeyError(f"no node {node_id!r} in program {self.program.name!r}")
        from topo.runtime import Handle, connect_program

        if self._client is None:
            assert self.launcher.registry is not None
            self._client = connect_program(self.launcher.registry.info)
        return Handle(node_id, timeout, program=self._client)

    def snapshot(self) -> Snapshot:
        """Take a consistent snapshot of the running program now (see ``topo snapshot``)."""
        return self.launcher.snapshot("topo.launch's snapshot()")

    def apply(
        self,
        source: Program | str | Path,
        params: Mapping[str, Any] | Sequence[str] | None = None,
        *,
        dry_run: bool = False,
        max_unavailable: int = 1,
        fresh: bool = False,
        timeout: float | None = 300.0,
        confirm: bool = False,
        reset_params: bool = False,
    ) -> Change:
        """Change the running program into ``source`` (a topology file compiled with
        ``params``, or a program), as ``topo apply`` does: new nodes start, changed ones
        restart ``max_unavailable`` at a time, removed ones stop, and every other node
        goes on; a node restarted with a new definition keeps its state (``save`` /
        ``restore``) unless ``fresh``. A file starts from the run's parameters
        (``params`` change them by name; ``reset_params``: from the file's defaults).
        Waits up to ``timeout`` for the change to end. Raises ``ApplyRefused`` when it
        cannot be applied live, ``ApplyNeedsConfirmation`` when it would stop the
        program or lose work and ``confirm`` is not given (nothing changed then)."""
        from topo.supervisor.change_record import read_change

        if isinstance(source, Program):
            program, where = source, {}
        else:
            carried = [] if reset_params else self.launcher.params_given
            loaded = load(source, params, carried=carried)
            program = loaded.program
            self._check_arguments(loaded)
            where = {
                "file": str(Path(source).resolve()),
                "topology": loaded.yaml_text,
                "params_given": list(loaded.spec.given),
                "params": {k: v for k, v in loaded.spec.param_values.items()},
            }
        plan, generation = self.launcher.apply(
            program,
            dry_run=dry_run,
            max_unavailable=max_unavailable,
            source=where,
            keep_state=not fresh,
            confirmed=confirm,
        )
        if plan.refused:
            raise ApplyRefused(list(plan.refused))
        if plan.confirm and generation is None and not dry_run:
            raise ApplyNeedsConfirmation(list(plan.confirm))
        record = None
        if generation is not None:
            import time

            end = None if timeout is None else time.monotonic() + timeout
            while True:
                record = read_change(self.run_dir, generation)
                if record is not None and record.get("result") != "applying":
                    break
                if end is not None and time.monotonic() > end:
                    break
                time.sleep(0.02)
        return Change(plan, generation, record)

    def _check_arguments(self, loaded: Loaded) -> None:
        """Every target of ``loaded`` imported where the nodes import them (procs: its fork
        server) and every node's arguments checked, as topo run does: a wrong argument is
        an error at its line (``TopoError``), before anything changes."""
        from topo.compile.checks import check_imports, checked_targets
        from topo.targets import TargetInfo

        program = loaded.program
        found = self.launcher.describe_targets(
            checked_targets(program, loaded.spec), program.source
        )
        described = {
            t: v if isinstance(v, str) else TargetInfo.from_json(v) for t, v in found.items()
        }
        imports_here = self.launcher.backend.imports_here
        check_imports(program, loaded.spec, imports_here=imports_here, described=described)

    def wait_ready(self, timeout: float | None = 60.0) -> bool:
        """Wait until every node is up (served / running)."""
        return self.launcher.wait_ready(timeout)

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait for the program to end; its exit code, or None on timeout."""
        code = self.launcher.wait(timeout)
        if self.launcher.done:
            self._close_client()
        return code

    def stop(
        self, reason: str = "stopped by the caller", timeout: float | None = None
    ) -> int | None:
        """Stop (stop event, grace period, kill) and wait up to ``timeout``."""
        if not self.launcher.done:
            self.launcher.request_stop(reason)
        return self.wait(timeout)

    def kill(self) -> None:
        """Kill every executable now."""
        self.launcher.supervisor.kill()

    def pids(self) -> set[int]:
        """Every process id this run started on this machine (executables and helpers), for
        orphan checks; processes on other hosts (ssh) are not listed."""
        return set(self.launcher.state.all_pids)

    def status(self) -> list[NodeStatus]:
        """Current status of every node."""
        return list(self.launcher.state.nodes.values())

    def log(self, node_id: str) -> str:
        """The log file content of ``node_id`` so far (the current file: what a size cap
        rotated away is in ``<node>.log.1`` and on)."""
        from topo.backends.logs import log_path

        return log_path(self.run_dir, node_id).read_text(errors="replace")

    def _close_client(self) -> None:
        if self._client is not None:
            self._client.address_book.close()
            self._client = None

    def __enter__(self) -> RunningProgram:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


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
    files kept (``log_max_mb`` None or 0: no cap). A program the backend cannot run
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
    ``topo.snapshots.store.SnapshotError`` says what differs and nothing starts. It is
    read and checked here once: the run starts from the snapshot checked.

    All of it goes to the launcher as one ``topo.supervisor.run_request.RunRequest``."""
    from topo.backends.base import RunOptions
    from topo.backends.rerun import git_lookup, make_record
    from topo.supervisor.launcher import Launcher
    from topo.supervisor.run_request import RunRequest

    if params and not isinstance(source, str | Path):
        raise ValueError("params apply to a topology file, not to a Program")
    chosen = _backend(backend, backend_options)
    # procs: the fork server starts importing now, while the program is compiled.
    warm = not isinstance(source, Program) and chosen.warm_up()
    git = git_lookup(source if isinstance(source, str | Path) else None)  # while it compiles
    try:
        made = _made(source, params, chosen if check_imports else None, warm)
        snapshot = None if start_from is None else _fitting(made.program, start_from, same_program)
        options = RunOptions(
            grace_s=grace_s,
            log_dir=Path(log_dir),
            run_dir=None if run_dir is None else Path(run_dir),
            disable_run=disable_run,
            topology_yaml=made.yaml_text,
            log_max_mb=log_max_mb,
            log_keep=log_keep,
        )
        record = make_record(
            backend=chosen.name,
            backend_options=backend_options,
            file=made.file,
            params_given=_overrides(params),
            params=made.params,
            grace_s=options.grace_s,
            log_dir=options.log_dir,
            log_max_mb=options.log_max_mb,
            log_keep=options.log_keep,
            disable_run=options.disable_run,
            argv=argv,
            from_run=from_run,
            git=git,
        )
        return Launcher(RunRequest(made.program, chosen, options, record, snapshot))
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


def _fitting(program: Program, start_from: str | Path | Snapshot, same_program: bool) -> Snapshot:
    """The snapshot ``start_from`` names, read once and checked against ``program``
    (``SnapshotError`` otherwise), with its path resolved: ``runs/latest`` moves to the
    new run once its directory is made, and the nodes read their states from it later."""
    from dataclasses import replace

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
