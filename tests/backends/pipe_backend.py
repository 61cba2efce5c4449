"""A remote backend written in the tests: a transport and a placement, nothing else.

Its "hosts" are names; an agent is the remote core's stream agent started as a local
process, talking JSON lines over its pipes, as an ``srun`` step would: what the ssh
backend does over SSH. Executables go round-robin over the hosts, and to the first host
up when theirs is lost. Everything else is the remote core's (``topo.backends.remote``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

from topo.backends.base import Backend, ExecutableRunner, JobContext, Network, Sink
from topo.backends.proctree import how_it_ended, kill_tree
from topo.backends.remote.fleet import Fleet
from topo.backends.remote.records import Agent
from topo.backends.remote.transport import AGENT_MODULE, StreamTransport, run_init

PING_S = 0.5
LEASE_S = 5.0


class Talker:
    """A node that prints what it is asked to say (its log is streamed back)."""

    def say(self, text: str) -> str:
        print(text, flush=True)
        return text

    def pid(self) -> int:
        return os.getpid()


class PipeLink:
    """One agent's pipes: requests out, its reports in (a thread), and the lease."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        on_message: Callable[[dict[str, Any]], None],
        on_exit: Callable[[str], None],
    ) -> None:
        self.proc = proc
        self.ended = False
        self._lock = threading.Lock()
        self._on_message, self._on_exit = on_message, on_exit
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=self._ping, daemon=True).start()

    def send(self, **msg: Any) -> None:
        assert self.proc.stdin is not None
        with self._lock:
            try:
                self.proc.stdin.write((json.dumps(msg) + "\n").encode())
                self.proc.stdin.flush()
            except (OSError, ValueError):
                pass

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._on_message(json.loads(line))
        self.ended = True
        self._on_exit(how_it_ended(self.proc.wait()))

    def _ping(self) -> None:
        while not self.ended and self.proc.poll() is None:
            self.send(t="ping")
            threading.Event().wait(PING_S)

    def close(self) -> None:
        with self._lock:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()  # EOF: the agent ends everything it started
            except OSError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            kill_tree(self.proc.pid)
            self.proc.wait(5)


class PipeAgents(StreamTransport):
    """How this backend reaches a host's agent: a local process and its pipes."""

    def open_agent(self, agent: Agent, job: JobContext) -> Any:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        with open(self.fleet.agent_log(agent.label), "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", AGENT_MODULE],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
            )
        fleet = self.fleet
        link = PipeLink(
            proc, lambda msg: fleet.message(agent, msg), lambda how: fleet.agent_ended(agent, how)
        )
        run_dir = str(job.run_dir / "hosts" / agent.host)  # the host's own files
        init = {**run_init(job), "lease_s": LEASE_S}
        link.send(t="init", host=agent.host, address="127.0.0.1", run_dir=run_dir, **init)
        return link


class PipeBackend(Backend):
    """Executables over named "hosts", one local agent process each."""

    name = "pipe"

    def __init__(self, hosts: tuple[str, ...] = ("a", "b")) -> None:
        self.hosts = hosts
        self.fleet: Fleet | None = None
        self._where: dict[str, str] = {}

    def network(self) -> Network:
        """Across hosts, as a remote backend: TCP and CURVE (no socket directory here)."""
        return Network(bind_host="127.0.0.1", advertise_host="127.0.0.1", mechanism="curve")

    def open(self, job: JobContext, sink: Sink) -> None:
        self.fleet = Fleet(job, sink, PipeAgents())
        self.fleet.open(self.hosts)
        for i, exe in enumerate(job.program.executables):
            self._where[exe.id] = self.hosts[i % len(self.hosts)]

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        assert self.fleet is not None
        runner = self.fleet.runner(exe, attempt)
        up = [h for h in self.hosts if h in self.fleet.hosts_up(self.hosts)]
        host = self._where[exe] if self._where[exe] in up else next(iter(up), None)
        if host is None:
            self.fleet.refuse(runner, "cannot start: no host is up")
        else:
            self._where[exe] = host
            self.fleet.send([(runner, host)])
        return runner

    def location(self, exe: str) -> str | None:
        return self._where.get(exe)

    def helper_pids(self) -> list[int]:
        return [] if self.fleet is None else self.fleet.helper_pids()

    def close(self) -> None:
        if self.fleet is not None:
            self.fleet.close()
