"""Supervision state: what the supervisor changes, the launcher shows and the live view reads."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from topo.backends.base import Backend, ExecutableRunner
from topo.ir import Program, RestartPolicy
from topo.runs.node_status import LimiterProgress, NodeStatus
from topo.supervisor.phases import limiter_progress


@dataclass
class ExeStatus:
    """Supervision state of one executable."""

    id: str
    nodes: tuple[str, ...]
    policy: RestartPolicy
    attempt: int = -1
    restarts: int = 0
    runner: ExecutableRunner | None = None
    state: str = "pending"
    restart_at: float | None = None
    failure: tuple[str, str] | None = None  # (node id, traceback) of the current attempt
    stuck: str = ""  # why the current attempt is being killed for not becoming ready
    killed_at: float | None = None  # monotonic time the stuck attempt was killed
    pids: list[int] = field(default_factory=list)
    # topo apply: not in the program any more (never restarted; removed once it ended)
    leaving: bool = False
    retiring: str = ""  # why its nodes were asked to end (topo apply), while they end
    retire_deadline: float | None = None  # monotonic: killed if still running then
    asked: str = ""  # who asked to restart the current attempt (``topo restart``), if anyone
    asked_restarts: int = 0  # restarts asked for: they do not count against the policy
    unstarted_restarts: int = 0  # attempts lost with their host before they ran: nor these

    @property
    def failed_restarts(self) -> int:
        """The restarts its restart policy made (the budget of ``max_restarts``)."""
        return self.restarts - self.asked_restarts - self.unstarted_restarts


@dataclass(frozen=True)
class Failure:
    """Why a run ended with exit code 1."""

    node: str
    executable: str
    pid: int | None
    message: str
    traceback: str = ""


def _nowhere(exe_id: str) -> str | None:
    return None


@dataclass
class RunState:
    """One run as it is: its nodes and executables, how it goes and how it ended. The
    ``Supervisor`` changes it from the launcher's thread; the ``Launcher`` fills in the
    run directory, the start time and the exit code. It is what the live views read of
    a run in this process (a ``topo.cli.view_source.RunSource``) and what ``status.json``
    is written from."""

    nodes: dict[str, NodeStatus]
    exes: dict[str, ExeStatus]
    warnings: list[str] = field(default_factory=list)
    program_name: str = ""
    backend_name: str = ""
    grace_s: float = 5.0  # seconds nodes get to stop before they are killed
    run_dir: Path = field(default_factory=Path)  # set when the launcher made it
    hosts: Callable[[str], str | None] = _nowhere  # executable id -> its host (the backend's)
    devices: Callable[[str], str | None] = _nowhere  # executable id -> its accelerators
    failure: Failure | None = None
    stop_reason: str = ""
    exit_code: int | None = None
    started_at: float = 0.0  # wall clock, when the backend was opened
    ready_at: float | None = None  # wall clock, when every node had been ready once
    stopping_since: float | None = None  # wall clock, when the stop began (the grace runs)
    all_ready: threading.Event = field(default_factory=threading.Event)
    all_pids: set[int] = field(default_factory=set)  # every pid the run ever had here
    generation: int = 0  # how many changes topo apply made to the program

    @classmethod
    def of(
        cls,
        program: Program,
        warnings: list[str] | None = None,
        *,
        backend: Backend | None = None,
        grace_s: float | None = None,
    ) -> RunState:
        """Every node and executable of ``program`` pending; each executable restarts by
        the policy of its (first node's) group. ``grace_s`` None: the program's."""
        exes = {}
        for e in program.executables:
            groups = [program.group_of(n) for n in e.nodes]
            policy = groups[0].restart if groups else RestartPolicy()
            exes[e.id] = ExeStatus(e.id, e.nodes, policy)
        nodes = {n.id: NodeStatus(n.id, n.executable) for n in program.nodes}
        return cls(
            nodes,
            exes,
            list(warnings or []),
            program_name=program.name,
            backend_name="" if backend is None else backend.name,
            grace_s=program.stop.grace_s if grace_s is None else grace_s,
            hosts=_nowhere if backend is None else backend.location,
            devices=_nowhere if backend is None else backend.device_of,
        )

    def location(self, exe_id: str) -> str | None:
        """The host an executable runs on, for a backend that spans hosts (else None)."""
        return self.hosts(exe_id)

    def device(self, exe_id: str) -> str | None:
        """The accelerators an executable was given (``gpu 0``; None: none)."""
        return self.devices(exe_id)

    @property
    def limiter(self) -> LimiterProgress | None:
        """How far a steps limiter node got (None: the program has none, or it has not
        reported yet)."""
        return limiter_progress(self.nodes)


def signal_name(code: int) -> str:
    """``-9`` -> ``SIGKILL`` (an exit status of an executable killed by a signal)."""
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"
