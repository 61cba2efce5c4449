"""What a run shows of its nodes: one node's status (its row of ``status.json``, of the
live view and of ``topo status``) and a steps limiter's progress. Plain data of the
standard library: the supervisor fills them in, the commands that read a run show them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

LIMIT_KEYS = ("limit_key", "limit", "eta_s")  # the limiter's figures besides the count


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
    stalled_s: float | None = None  # running without progress this long (supervisor.progress)
    busy: dict[str, Any] | None = None  # every handler thread stuck: what the node reported
    phase: str = ""  # what a starting node waits for: "waiting for replay" (supervisor.phases)
    rpc: dict[str, Any] | None = None  # its latest call figures (supervisor.rpc_stats)
    pid_start: int | None = None  # its process's start time (``topo.runs.probe``), if local
    breakpoint: str | None = None  # "file:line" while stopped at breakpoint() (topo debug)


@dataclass(frozen=True)
class LimiterProgress:
    """How far a steps limiter got: ``actor_steps 47.1k/50k · ~20 s``."""

    node: str
    key: str
    steps: float
    limit: float
    eta_s: float | None = None
