"""Supervision state: what the supervisor changes, the launcher shows and the live view reads."""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, field
from typing import Any

from topo.backends.base import ExecutableRunner
from topo.ir import Program, RestartPolicy


@dataclass
class NodeStatus:
    """What the live view shows for one node."""

    id: str
    exe: str
    state: str = "pending"
    pid: int | None = None
    pid_start: int | None = None  # its process's start time (``topo.runs.probe``), if local
    restarts: int = 0
    started: float | None = None
    last_line: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)  # latest figures (topo.metrics)
    stalled_s: float | None = None  # running without progress this long (supervisor.progress)
    busy: dict[str, Any] | None = None  # every handler thread stuck: what the node reported
    phase: str = ""  # what a starting node waits for: "waiting for replay" (supervisor.phases)
    rpc: dict[str, Any] | None = None  # its latest call figures (supervisor.rpc_stats)


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

    @property
    def failed_restarts(self) -> int:
        """The restarts its restart policy made (the budget of ``max_restarts``)."""
        return self.restarts - self.asked_restarts


@dataclass(frozen=True)
class Failure:
    """Why a run ended with exit code 1."""

    node: str
    executable: str
    pid: int | None
    message: str
    traceback: str = ""


@dataclass
class RunState:
    """The mutable state of one run. The ``Supervisor`` changes it from the launcher's
    thread; the ``Launcher`` fills in the start time and exit code and shows the rest."""

    nodes: dict[str, NodeStatus]
    exes: dict[str, ExeStatus]
    warnings: list[str] = field(default_factory=list)
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
    def of(cls, program: Program, warnings: list[str] | None = None) -> RunState:
        """Every node and executable of ``program`` pending; each executable restarts by
        the policy of its (first node's) group."""
        exes = {}
        for e in program.executables:
            groups = [program.group_of(n) for n in e.nodes]
            policy = groups[0].restart if groups else RestartPolicy()
            exes[e.id] = ExeStatus(e.id, e.nodes, policy)
        nodes = {n.id: NodeStatus(n.id, n.executable) for n in program.nodes}
        return cls(nodes, exes, list(warnings or []))


def signal_name(code: int) -> str:
    """``-9`` -> ``SIGKILL`` (an exit status of an executable killed by a signal)."""
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"
