"""The backend interface: what every backend (threads, procs, later ssh, ray) implements.

A backend only knows how to *start one executable* of a compiled ``Program``
and how to signal or kill it; everything else (address book, status events,
failure policy, restarts, stopping, logs) is the shared ``Launcher``. The seams
a backend fills in besides starting executables:

* ``network()``: where the program's registry binds, the address peers dial and
  the auth mechanism (PLAIN on loopback, CURVE across hosts);
* ``check(program)``: what it cannot honour, as diagnostics, before anything starts;
* ``log_source(job, emit)``: where the launcher gets node log lines from, when not
  from the run directory's log files;
* ``options()``: the options it takes (``topo run -b NAME --hosts H``, or
  ``get_backend(name, hosts=H)``), and ``placement_text(program, **options)``: what
  ``topo plan --backend NAME`` prints about where executables would run.

Backends are found by name in one table, the ``topo.backends`` entry-point group:
topo's own (threads, procs, ssh, ray) are registered there as plug-ins are.

Node status (ready / finished / failed) reaches the launcher over the registry's
``report`` RPC, the same way for every backend; process-level facts (an
executable started, exited with a code) come through the ``Sink`` from whoever
owns the process.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

from topo.backends.rotation import DEFAULT_LOG_KEEP, DEFAULT_LOG_MAX_MB, LogLimit
from topo.diagnostics import Diagnostic
from topo.ir import Program

if TYPE_CHECKING:  # the runtime (zmq) is not imported to pick a backend
    from importlib.metadata import EntryPoint

    from topo.runtime import Authority, RegistryInfo
    from topo.runtime.auth import Mechanism
    from topo.targets import TargetInfo

EventKind = Literal[
    "starting",
    "started",
    "ready",
    "log",
    "finished",
    "failed",
    "exited",
    "restarting",
    "stopping",
    "killed",
    "stopped",
    "metrics",
    "stalled",
    "busy",
    "snapshot",
    "applied",
]


@dataclass(frozen=True)
class Event:
    """One status change of a running program, as shown by the live view."""

    kind: EventKind
    node: str | None = None
    executable: str | None = None
    pid: int | None = None
    message: str = ""
    time: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class RunOptions:
    """How to run a program (independent of the backend)."""

    grace_s: float | None = None  # None: the program's stop.grace_s
    run_dir: Path | None = None  # None: <log_dir>/<name>-<timestamp>
    log_dir: Path = Path("runs")
    disable_run: bool = False  # courier nodes only serve; their run() is not called
    default_deadline: float | None = None  # None: the groups' rpc.deadline_s
    topology_yaml: str | None = None  # the topology as it runs (topology.yaml)
    log_max_mb: float | None = DEFAULT_LOG_MAX_MB  # cap of each node log file; None/0: none
    log_keep: int = DEFAULT_LOG_KEEP  # rotated files kept per log (<node>.log.1 ...)
    metrics_to: tuple[str, ...] = ()  # metric rows also as csv, tensorboard (metrics_out)
    metrics_port: int | None = None  # the launcher's /metrics endpoint (0: any free port)

    @property
    def log_limit(self) -> LogLimit | None:
        """The cap of node log files (``topo.backends.rotation``); None: no cap."""
        return LogLimit.of(self.log_max_mb, self.log_keep)


@dataclass(frozen=True)
class Network:
    """The registry a backend needs: where it binds, what peers dial, how they authenticate.

    ``advertise_host`` None means the bound address itself. ``plain`` is for loopback only;
    a backend whose executables run on other hosts asks for ``curve`` (encrypted).
    ``control_host``: where the launcher's control channel listens on TCP, for a launcher
    operated from other hosts (inside a Slurm job); None: a Unix socket on this machine."""

    bind_host: str = "127.0.0.1"
    advertise_host: str | None = None
    mechanism: Mechanism = "plain"
    control_host: str | None = None


LOOPBACK = Network()


@dataclass(frozen=True)
class JobContext:
    """What a backend needs to start executables of one run."""

    program: Program
    options: RunOptions
    registry: RegistryInfo  # public: no secret (each executable gets a grant, see grants)
    run_dir: Path
    launcher_pid: int
    authority: Authority | None = None


# A node's failure text that starts with this is why its process was ended on purpose (a
# limit of its group), not a traceback: the launcher says it as the reason.
ENDED_BY_TOPO = "topo ended it: "

LineSink = Callable[[str, str], None]  # emit(label, line): label is a node or executable id


class LogSource(Protocol):
    """Where the launcher gets log lines from (local files tailed, or streamed)."""

    def start(self) -> None:
        """Begin delivering lines (from now on)."""

    def append(self, label: str, text: str) -> None:
        """Add ``text`` to ``label``'s log without emitting it (a traceback shown apart)."""

    def follow(self, label: str, path: Path) -> None:
        """Deliver the lines of one more log from its start (a node ``topo apply`` added)."""

    def close(self) -> None:
        """Deliver what is left and stop."""


class Sink(ABC):
    """Where a backend and the registry report what happens inside and to executables."""

    @abstractmethod
    def node_status(
        self, kind: str, node: str, exe: str, attempt: int, pid: int, traceback: str = ""
    ) -> None:
        """A node is ``ready``, ``finished`` (run() returned) or ``failed`` (raised);
        delivered by the registry's ``report`` RPC."""

    @abstractmethod
    def started(self, exe: str, attempt: int, pid: int) -> None:
        """The pid of an attempt is known (if ``start`` could not return it)."""

    @abstractmethod
    def exited(
        self, exe: str, attempt: int, pid: int, code: int, reason: str = "", started: bool = True
    ) -> None:
        """An executable ended: ``code`` is its exit status, ``-N`` when killed by signal N;
        ``reason`` says what happened when the backend knows better (e.g. its host was lost).
        ``started`` False: the attempt never ran (its host was lost before it could start
        there), so it is started elsewhere without counting as a failure."""

    @abstractmethod
    def backend_failed(self, message: str) -> None:
        """The backend cannot run executables any more (e.g. the procs fork server died
        before it was ready): the run fails at once with ``message``."""


class ExecutableRunner(ABC):
    """One started attempt of one executable."""

    exe: str
    attempt: int
    pid: int

    @abstractmethod
    def kill(self) -> None:
        """End it at once (SIGKILL, or abandon threads)."""

    def dump_stacks(self, node: str) -> str:
        """The stacks of ``node``'s threads, or where they were written (a node that does
        not become ready is shown this way before it is killed); "" if not supported."""
        return ""


OptionType = type[str] | type[int] | type[float] | type[bool] | type[Path]


@dataclass(frozen=True)
class BackendOption:
    """One option a backend takes: a keyword of its constructor (and of its
    ``placement_text``), and on the command line the flag ``--name`` (``_`` as ``-``)
    of ``topo run`` and ``topo plan`` with ``--backend`` naming it. A ``bool`` option
    is a flag without a value."""

    name: str
    help: str  # a noun phrase: "the inventory of hosts to run on"
    type: OptionType = str
    required: bool = False
    metavar: str | None = None  # None: from the type (TEXT, INTEGER, NUMBER, PATH)

    @property
    def flag(self) -> str:
        """The command-line flag: ``--hosts``."""
        return "--" + self.name.replace("_", "-")


@dataclass(frozen=True)
class Resumed:
    """Where a run brought back by its backend starts (a job Slurm requeued): the run
    directory's newest snapshot, its run id kept, and why it was stopped (``the time
    limit``, ``preemption``)."""

    snapshot: Path | None  # None: it had none; the nodes start fresh
    run_id: str | None
    after: str

    @property
    def message(self) -> str:
        """``resumed from snapshot 3 after the time limit``."""
        if self.snapshot is None:
            return f"started again after {self.after}: no snapshot to resume from"
        return f"resumed from snapshot {self.snapshot.name} after {self.after}"


class GuardedRun(Protocol):
    """What a guard may do to the run it guards (the ``Launcher``'s side)."""

    @property
    def phase(self) -> str: ...

    def snapshot_now(self, reason: str) -> str:
        """Take a snapshot; what happened in words."""

    def request_stop(self, reason: str = ..., code: int = ..., grace_s: float | None = ...) -> None:
        """Stop the program as ``topo stop`` does."""

    def stop_on_sigterm(self, reason: str = ...) -> None:
        """Stop the program as a SIGTERM asks (within ``Guard.sigterm_grace``)."""


class Guard(ABC):
    """What keeps a run going where its machines are lent for a time (a Slurm job: its
    time limit, preemption): ``resumed`` before the start (a run brought back), ``start``
    once the run runs, ``finish`` once it ended (e.g. asking for the job again)."""

    @abstractmethod
    def resumed(self, run_dir: Path) -> Resumed | None:
        """The run in ``run_dir`` brought back (None: a first start)."""

    @abstractmethod
    def start(self, run: GuardedRun, run_dir: Path) -> None:
        """Watch for the end coming (called from the thread that started the run)."""

    @abstractmethod
    def finish(self) -> None:
        """The run ended (stopped, killed, failed): what the guard decided is done."""

    def sigterm_grace(self) -> float | None:
        """How long a stop on SIGTERM may take before the scheduler kills the whole run
        (Slurm: ``KillWait`` after ``scancel``); None: as long as the run's grace."""
        return None


class Backend(ABC):
    """Starts executables of a program; the ``Launcher`` does the rest."""

    name: str = ""
    local_pids: bool = True  # False: pids are on other hosts (not this machine's processes)
    # False: node code runs in another Python environment (other hosts), so a target whose
    # import fails here is left to the backend's own check there (``topo run`` checks
    # imports and node arguments here before it starts anything).
    imports_here: bool = True
    # What it cannot do that backends are checked for (the conformance suite,
    # ``topo.testing.suite``), capability -> why not: "kill" (end one executable's process
    # alone: a node killed by its pid), "memory" (hold a group to ``resources.memory``).
    # The suite skips those tests with the reason; ``can_update`` says the same of apply.
    cannot: ClassVar[Mapping[str, str]] = MappingProxyType({})

    @classmethod
    def options(cls) -> tuple[BackendOption, ...]:
        """The options this backend takes from the command line (``topo run -b NAME
        --OPTION``): each a keyword of the constructor. Default: none."""
        return ()

    @classmethod
    def placement_text(cls, program: Program, **options: Any) -> str | None:
        """Where the executables of ``program`` would run, as text for ``topo plan
        --backend NAME`` (given the declared ``options``); None: nothing to add. Raises
        ``TopoError`` for a placement that cannot be made. Nothing is started."""
        return None

    def network(self) -> Network:
        """The registry this backend's executables can reach (default: loopback, PLAIN)."""
        return LOOPBACK

    def check(self, program: Program) -> list[Diagnostic]:
        """What in ``program`` this backend cannot honour (errors refuse the run, warnings
        are shown); called before anything starts."""
        return []

    def log_source(self, job: JobContext, emit: LineSink) -> LogSource | None:
        """Where node output comes from, when not from the log files of the run directory
        (None, the default: the launcher follows those, ``topo.backends.tail``)."""
        return None

    def describe_targets(
        self, targets: list[str], source: str | None
    ) -> Mapping[str, TargetInfo | str] | None:
        """Import ``targets`` where the nodes will run and describe them for the checks
        before the run, and before a change to it (``topo apply``; see
        ``topo.targets.describe_targets``), or None: the launcher imports them itself.
        procs asks its fork server, which imports them anyway."""
        return None

    def warm_up(self) -> bool:
        """Start what does not depend on the program (procs: the fork server and its
        imports) while the caller still compiles it. True when something was started:
        the caller then opens the backend (a ``Launcher`` does), or calls ``close`` if
        the run never starts."""
        return False

    @abstractmethod
    def open(self, job: JobContext, sink: Sink) -> None:
        """Prepare a run (e.g. start the pre-warmed fork server)."""

    @abstractmethod
    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        """Start ``attempt`` (0, 1, ...) of executable ``exe``; return at once."""

    # Whether ``update`` works: the program of a running run can change (``topo apply``).
    can_update: bool = False

    def check_update(self, program: Program) -> list[Diagnostic]:
        """What this backend cannot honour if the running program became ``program`` (as
        it would run: its executables arranged to keep the running ones, see
        ``topo.ir.packing.as_applied``), e.g. no host has room for the new executables:
        errors refuse the change before anything changes. Default: the same as
        ``check`` (a backend whose ``check`` prepares the run answers this itself)."""
        return self.check(program)

    def update(self, program: Program) -> None:
        """The running program is now ``program`` (``topo apply``): executables of it may
        be started from now on (new ones, and ones restarted with a new definition);
        those running go on untouched. Called only when ``can_update``."""
        raise NotImplementedError(f"the {self.name} backend cannot change a running program")

    def guard(self) -> Guard | None:
        """What keeps the run going where its machines are lent for a time (a Slurm
        job's time limit), started by the launcher; None (the default): nothing."""
        return None

    def helper_pids(self) -> list[int]:
        """Processes the backend started besides executables (e.g. a fork server)."""
        return []

    def location(self, exe: str) -> str | None:
        """The host ``exe`` runs (or will run) on, for backends spanning hosts; else None."""
        return None

    def device_of(self, exe: str) -> str | None:
        """The accelerators ``exe`` was given (``gpu 0``), for the views; None: none."""
        found = getattr(self, "accelerators", {}).get(exe)
        return None if found is None else str(found)

    @abstractmethod
    def close(self) -> None:
        """Release everything ``open`` made; every executable has exited or been killed."""

    def left_behind(self) -> list[str]:
        """What ``close`` could not clean up, for the user (e.g. a run's files on a host
        that was lost); asked after ``close``. Default: nothing."""
        return []


def memory_not_enforced(program: Program, backend: str, why: str) -> list[Diagnostic]:
    """A warning per enabled group with a ``resources.memory`` limit, for a backend that
    cannot enforce one (``why``): the program runs without it."""
    return [
        Diagnostic(
            f"group {g.name!r} sets resources.memory, which the {backend} backend cannot "
            f"enforce ({why}); it runs without the limit",
            g.origin,
            severity="warning",
            hint="run it with --backend procs (or ssh) to have the limit enforced",
        )
        for g in program.groups
        if g.enabled and g.resources.memory is not None
    ]


# -- the table of backends ------------------------------------------------------------

ENTRY_POINT_GROUP = "topo.backends"
OWN_DISTRIBUTION = "topo-launch"  # its backends (threads, procs, ssh, ray) win a name clash


class BackendNotFound(ValueError):
    """``get_backend`` was given a name that no backend answers to, or whose entry point
    does not load."""


class BackendOptionError(TypeError):
    """A backend was given an option it does not take, or not one it needs."""


@functools.cache
def _table() -> dict[str, EntryPoint]:
    """Every backend, name -> entry point of group ``topo.backends``: topo's own (declared
    in its pyproject.toml) and the installed plug-ins, one table. Read once, when first
    asked for (``topo validate`` never asks). A plug-in cannot take a name topo's own
    backends have."""
    from importlib.metadata import entry_points

    found = list(entry_points(group=ENTRY_POINT_GROUP))
    own = [ep for ep in found if ep.dist is not None and ep.dist.name == OWN_DISTRIBUTION]
    table: dict[str, EntryPoint] = {}
    for ep in [*own, *found]:
        table.setdefault(ep.name, ep)
    return table


def available_backends() -> list[str]:
    """Names accepted by ``get_backend``: topo's own backends and the installed plug-ins."""
    return sorted(_table())


def backend_factory(name: str) -> Callable[..., Backend]:
    """What the entry point ``name`` names: a ``Backend`` subclass (or a function making
    one). Raises ``BackendNotFound`` for a name no backend answers to."""
    entry = _table().get(name)
    if entry is None:
        choices = ", ".join(available_backends()) or "none (is topo-launch installed?)"
        raise BackendNotFound(f"unknown backend {name!r}; available: {choices}")
    try:
        factory: Callable[..., Backend] = entry.load()
    except Exception as exc:  # a broken plug-in: said in one line, like an unknown name
        raise BackendNotFound(
            f"backend {name!r} ({entry.value}) does not load: {type(exc).__name__}: {exc}"
        ) from exc
    return factory


def backend_options(name: str) -> tuple[BackendOption, ...]:
    """The options backend ``name`` declares (``Backend.options``); none for a plug-in
    registered as a plain function."""
    factory = backend_factory(name)
    declare = getattr(factory, "options", None)
    return tuple(declare()) if callable(declare) else ()


def backends_taking(flag: str) -> list[str]:
    """The backends that declare the command-line option ``flag`` (``--hosts``), topo's
    own first: what an error about a misplaced option names. A plug-in that does not
    load is left out."""
    out = []
    for name in _table():
        try:
            declared = backend_options(name)
        except Exception:  # a broken plug-in must not hide the message being made
            continue
        if any(option.flag == flag for option in declared):
            out.append(name)
    return out


def placement_text(name: str, program: Program, **options: Any) -> str | None:
    """What ``topo plan --backend NAME`` adds to the plan (``Backend.placement_text``)."""
    factory = backend_factory(name)
    place = getattr(factory, "placement_text", None)
    return place(program, **options) if callable(place) else None


def get_backend(name: str, **options: Any) -> Backend:
    """A fresh backend object by name, given its ``options`` (e.g. an SSH inventory).

    Raises ``BackendNotFound`` for a name no backend answers to, ``BackendOptionError``
    (a ``TypeError``) for an option the backend does not take or one it needs."""
    import inspect

    factory = backend_factory(name)
    try:
        inspect.signature(factory).bind(**options)
    except TypeError:
        accepted = inspect.signature(factory).parameters
        wrong = sorted(set(options) - set(accepted))
        if wrong:
            raise BackendOptionError(
                f"backend {name!r} does not take the option(s) {', '.join(wrong)}"
            ) from None
        needed = [
            p.name
            for p in accepted.values()
            if p.default is inspect.Parameter.empty
            and p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
            and p.name not in options
        ]
        raise BackendOptionError(
            f"backend {name!r} needs the option(s) {', '.join(needed)}"
        ) from None
    backend = factory(**options)
    if not backend.name:
        backend.name = name
    return backend
