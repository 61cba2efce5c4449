"""One executable started on an SSH host, as the ``ssh`` backend's runner: killed and
asked for its stacks through its host's agent."""

from __future__ import annotations

import threading
import time
from typing import Any

from topo.backends.base import ExecutableRunner
from topo.rundir.layout import log_name


class RemoteRunner(ExecutableRunner):
    """An attempt of ``exe`` on ``host`` (its pid there once the agent says it started)."""

    def __init__(self, backend: Any, exe: str, attempt: int, host: str) -> None:
        self.exe = exe
        self.attempt = attempt
        self.pid = 0
        self.host = host
        self.known = threading.Event()
        self._backend = backend

    def kill(self) -> None:
        if self._backend.cancel_pending(self):
            return
        channel = self._backend.channels.get(self.host)
        if channel is None or channel.ended:
            return
        self.known.wait(5)
        channel.send(t="kill", exe=self.exe, attempt=self.attempt)

    def dump_stacks(self, node: str) -> str:
        channel = self._backend.channels.get(self.host)
        if channel is None or channel.ended or not self.pid:
            return ""
        channel.send(t="stacks", exe=self.exe, attempt=self.attempt)
        time.sleep(0.5)  # let the dump travel back before the kill that follows
        return f"(the stacks of its threads are in its log, {log_name(node)})"
