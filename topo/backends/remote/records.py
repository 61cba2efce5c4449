"""What the launcher keeps of a remote backend's agents (``Agent``) and of the attempts
it sent them (``RemoteRunner``: the runner the launcher holds, killed and asked for its
stacks through its host's agent)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from topo.backends.base import ExecutableRunner
from topo.backends.logs import file_size, wait_written
from topo.rundir.layout import log_name

Attempt = tuple[str, int, str]  # executable, attempt, its grant (JSON)


class Controls(Protocol):
    """What a runner asks of its fleet (``fleet.Fleet``)."""

    def kill(self, runner: RemoteRunner) -> None: ...

    def stacks(self, runner: RemoteRunner) -> bool: ...


@dataclass(eq=False)
class Agent:
    """One agent the launcher started on a host, as the launcher knows it."""

    host: str  # the backend's name of the host: an inventory host, a Ray node id
    gen: int  # 0 for the host's first agent of the run, then 1, 2, ...
    label: str  # what its log in the run directory is named after (agents/<label>.log)
    link: Any = None  # the transport's handle (an SSH channel, a Ray actor); None: starting
    runners: dict[tuple[str, int], RemoteRunner] = field(default_factory=dict)  # sent to it
    pid: int = 0  # on its host, from its hello
    server_pid: int = 0  # its fork server's, likewise
    ready: bool = False  # its fork server imported the targets
    dead: bool = False
    bye: str = ""  # why it said it ends, if it did
    began: float = field(default_factory=time.monotonic)


STACKS_S = 5.0  # a stack dump reaches the run directory's log within this, or is not waited for


class RemoteRunner(ExecutableRunner):
    """An attempt of ``exe``: waiting for its place or its host's agent, then sent to an
    agent (its pid there once the agent says it started it)."""

    def __init__(self, fleet: Controls, exe: str, attempt: int, output: Path) -> None:
        self.exe = exe
        self.attempt = attempt
        self.pid = 0
        self.output = output  # the run directory's log its output is appended to
        self.host: str | None = None  # where it goes, once placed
        self.agent: Agent | None = None  # the agent it was sent to
        self.killed = False
        self.queued_at = time.monotonic()
        self._fleet = fleet

    def kill(self) -> None:
        self._fleet.kill(self)

    def dump_stacks(self, node: str) -> str:
        """Have the attempt dump its stacks into its log (through its agent); where."""
        if not self.pid:
            return ""
        before = file_size(self.output)
        if not self._fleet.stacks(self):
            return ""
        wait_written(self.output, before, limit_s=STACKS_S)  # before the kill that follows
        return f"(the stacks of its threads are in its log, {log_name(node)})"
