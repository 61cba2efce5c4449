"""Supervision state the launcher keeps and the live view reads."""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any

from topo.backends.base import ExecutableRunner
from topo.ir import RestartPolicy


@dataclass
class NodeStatus:
    """What the live view shows for one node."""

    id: str
    exe: str
    state: str = "pending"
    pid: int | None = None
    restarts: int = 0
    started: float | None = None
    last_line: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)  # latest figures (topo.metrics)


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
    pids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Failure:
    """Why a run ended with exit code 1."""

    node: str
    executable: str
    pid: int | None
    message: str
    traceback: str = ""


def signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"
