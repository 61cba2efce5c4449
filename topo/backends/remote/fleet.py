"""The launcher's side of a remote backend's agents: ``Fleet``, one per run.

A fleet keeps one agent per host at a time (started through the backend's
``Transport``) and every attempt the backend started, from its start to its end:

* an attempt waits while its place is not known (``hold``: a Ray bundle not on a live
  node yet), or while its host's agent starts; then it goes to the agent with its grant,
  in one call per agent (``send``);
* what agents report becomes the ``Sink``'s: an attempt started (its pid there), ended
  (its exit code); the output of their logs goes into the run directory
  (``output.RunOutput``), the fork server's own and the fleet's notes to the host's
  agent log; a signal an agent lives through (a Slurm step's SIGTERM) to ``on_signal``;
* an agent that ends while its host is fine takes its attempts: they are reported
  lost, naming the host, the agent's pid and how it ended, so that their restart policy
  applies, and the host's next agent starts when something is sent there (at once for
  attempts that wait for it). A host whose agents keep dying as they start
  (``Transport.quick_deaths``), that cannot start a new one, or that its transport
  reports gone (a lease that ran out, a Ray node declared dead) is lost for the run: its
  attempts are reported lost with why, and nothing more goes there;
* ``kill`` of an attempt that was not sent yet reports it stopped; of one that was, asks
  its agent (which kills it at its fork if it was not forked yet).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from topo.backends.base import JobContext, Sink
from topo.backends.grants import exe_grant
from topo.backends.remote.follow import SERVER_LOG
from topo.backends.remote.output import RunOutput
from topo.backends.remote.records import Agent, Attempt, RemoteRunner
from topo.backends.remote.transport import Reports, Transport
from topo.rundir.layout import agent_log_name, exe_output_path

STOPPED = "was stopped before it started"


class Fleet(Reports):
    """The agents of one run and the attempts sent to them (see the module's docstring)."""

    def __init__(self, job: JobContext, sink: Sink, transport: Transport) -> None:
        self.output = RunOutput(job)  # the run directory: where what agents send lands
        self.sink = sink
        self.transport = transport
        transport.fleet = self
        self.lost: dict[str, str] = {}  # host -> why it was lost
        self.restarts: dict[str, int] = {}  # host -> agents started after one ended
        self.greeted: set[str] = set()  # hosts where an agent said hello
        self.closing = False
        self.on_signal: Callable[[str, str], None] | None = None  # (host, signal) a backend hears
        self._agents: dict[str, Agent] = {}  # host -> its current agent
        self._gen: dict[str, int] = {}  # host -> its latest agent's generation
        self._quick: dict[str, int] = {}  # host -> quick deaths of its agents in a row
        self._runners: dict[tuple[str, int], RemoteRunner] = {}  # placed, until they end
        self._held: list[RemoteRunner] = []  # not placed yet
        self._waiting: dict[str, list[RemoteRunner]] = {}  # host -> for its agent to start
        self._opening: dict[str, threading.Lock] = {}  # host -> one agent start at a time
        self._lock = threading.Lock()

    @property
    def job(self) -> JobContext:
        """The run, with the program as it is now (``topo apply`` changes it)."""
        return self.output.job

    # -- agents ---------------------------------------------------------------------
    def open(self, hosts: Iterable[str]) -> None:
        """Start the agents of ``hosts`` now, one after the other; a host where none can
        start is lost (noted)."""
        for host in hosts:
            why = self._start(host)
            if why is not None:
                with self._lock:
                    self.lost[host] = f"its agent could not start: {why}"
                where = self.transport.where(host)
                self.note(host, f"{where} lost before the start: {self.lost[host]}")

    def hosts_up(self, hosts: Iterable[str]) -> set[str]:
        """Those of ``hosts`` that are not lost."""
        with self._lock:
            return {h for h in hosts if h not in self.lost}

    def agents(self) -> list[Agent]:
        """The agents started and not known to have ended."""
        with self._lock:
            return [a for a in self._agents.values() if a.link is not None and not a.dead]

    def agent_pids(self) -> dict[str, int]:
        """Host -> the pid (there) of its current agent, for those that said hello."""
        return {a.host: a.pid for a in self.agents() if a.pid}

    def helper_pids(self) -> list[int]:
        """The live agents' processes and their fork servers (on their hosts)."""
        return [p for a in self.agents() for p in (a.pid, a.server_pid) if p]

    def _opening_lock(self, host: str) -> threading.Lock:
        with self._lock:
            return self._opening.setdefault(host, threading.Lock())

    def _start(self, host: str) -> str | None:
        """Start an agent on ``host`` unless one is up or starting, and send it what
        waits for it; why it could not (None: it started)."""
        with self._opening_lock(host):
            with self._lock:
                if self.closing or host in self.lost:
                    return "the run is stopping" if self.closing else self.lost[host]
                current = self._agents.get(host)
                if current is not None and not current.dead:
                    return None
                gen = self._gen[host] = self._gen.get(host, -1) + 1
                agent = self._agents[host] = Agent(host, gen, self.transport.label(host))
                job = self.job  # (a change made meanwhile is sent to it once it is up)
            try:
                link = self.transport.open_agent(agent, job)
            except Exception as exc:
                with self._lock:
                    agent.dead = True
                    if self._agents.get(host) is agent:
                        del self._agents[host]
                return str(exc) or type(exc).__name__
            with self._lock:
                agent.link = link
                if gen:
                    self.restarts[host] = self.restarts.get(host, 0) + 1
                if agent.dead:  # it ended already: the next agent takes what waits
                    return None
                waiting = self._waiting.pop(host, [])
                for r in waiting:
                    r.agent = agent
                    agent.runners[(r.exe, r.attempt)] = r
        if waiting:
            self.transport.spawn(agent, [self._attempt(r) for r in waiting])
        return None

    def _start_soon(self, host: str) -> None:
        """Start ``host``'s next agent on a thread of its own (what asks for it may be a
        transport's event loop); the host is lost if none can start."""

        def start() -> None:
            why = self._start(host)
            if why is not None and not self.closing and host not in self.lost:
                self.note(host, f"no new agent could start: {why}")
                self.lose_host(host, f"a new agent could not start: {why}")

        threading.Thread(target=start, name="topo-remote-agent", daemon=True).start()

    # -- attempts -------------------------------------------------------------------
    def runner(self, exe: str, attempt: int) -> RemoteRunner:
        """The runner of a new attempt (sent with ``send``, or held until placed)."""
        output = exe_output_path(self.job.run_dir, self.job.program.executable_index[exe])
        return RemoteRunner(self, exe, attempt, output)

    def hold(self, runner: RemoteRunner) -> None:
        """Keep ``runner`` until its place is known (``take_held``)."""
        with self._lock:
            self._held.append(runner)

    def take_held(self) -> list[RemoteRunner]:
        """The attempts held, in order (now the caller's to send or hold again)."""
        with self._lock:
            held, self._held = self._held, []
        return held

    def hold_again(self, runners: list[RemoteRunner]) -> None:
        """Hold these again, before the ones held since; those killed meanwhile are
        reported stopped."""
        with self._lock:
            self._held[:0] = [r for r in runners if not r.killed]
        for r in runners:
            if r.killed:
                self._stopped(r)

    def refuse(self, runner: RemoteRunner, why: str) -> None:
        """``runner`` cannot start (no host fits it, its place did not come): it ends so."""
        self.sink.exited(runner.exe, runner.attempt, 0, -9, STOPPED if runner.killed else why)

    def send(self, placed: Iterable[tuple[RemoteRunner, str]]) -> None:
        """Each attempt to the agent of its host, in one call per agent; one whose host
        has no agent up waits for the one that starts there now."""
        batches: dict[Agent, list[RemoteRunner]] = {}
        stopped: list[RemoteRunner] = []
        refused: list[tuple[RemoteRunner, str]] = []
        start: dict[str, None] = {}
        with self._lock:
            for runner, host in placed:
                if runner.killed:
                    stopped.append(runner)
                    continue
                if host in self.lost:  # lost since it was placed
                    refused.append((runner, f"was lost with {self.transport.where(host)}"))
                    continue
                runner.host = host
                self._runners[(runner.exe, runner.attempt)] = runner
                agent = self._agents.get(host)
                if agent is not None and agent.link is not None and not agent.dead:
                    runner.agent = agent
                    agent.runners[(runner.exe, runner.attempt)] = runner
                    batches.setdefault(agent, []).append(runner)
                    continue
                self._waiting.setdefault(host, []).append(runner)
                if agent is None or agent.dead:
                    start[host] = None
        for agent, runners in batches.items():
            self.transport.spawn(agent, [self._attempt(r) for r in runners])
        for runner in stopped:
            self._stopped(runner)
        for runner, why in refused:
            self.sink.exited(runner.exe, runner.attempt, 0, -9, why)
        for host in start:
            self._start_soon(host)

    def _attempt(self, runner: RemoteRunner) -> Attempt:
        """What an agent is sent to fork ``runner``: its executable's grant with it."""
        return (runner.exe, runner.attempt, exe_grant(self.job, runner.exe).to_json())

    def _stopped(self, runner: RemoteRunner) -> None:
        self.sink.exited(runner.exe, runner.attempt, 0, -9, STOPPED)

    def kill(self, runner: RemoteRunner) -> None:
        """End ``runner``'s attempt: reported stopped if it was not sent yet, else killed
        by its agent."""
        key = (runner.exe, runner.attempt)
        with self._lock:
            runner.killed = True
            waiting = self._waiting.get(runner.host or "", [])
            stopped = runner in self._held or runner in waiting
            if runner in self._held:
                self._held.remove(runner)
            elif runner in waiting:
                waiting.remove(runner)
                self._runners.pop(key, None)
            agent = runner.agent
        if stopped:
            self._stopped(runner)
        elif agent is not None and not agent.dead:  # None: being sent (it sees .killed)
            self.transport.kill(agent, runner.exe, runner.attempt)

    def stacks(self, runner: RemoteRunner) -> bool:
        """Have ``runner``'s agent make it dump its stacks; whether it was asked."""
        agent = runner.agent
        if agent is None or agent.dead:
            return False
        return self.transport.stacks(agent, runner.exe, runner.attempt)

    # -- what agents say --------------------------------------------------------------
    def message(self, agent: Agent, msg: Mapping[str, Any]) -> None:
        """One report of ``agent`` (``remote.stream``'s vocabulary; any thread)."""
        t = msg.get("t")
        if t == "out":
            self.logs(agent, {str(msg["label"]): str(msg["data"])})
        elif t == "started":
            runner = self._runners.get((msg["exe"], msg["attempt"]))
            if runner is not None:
                runner.pid = int(msg["pid"])
            self.sink.started(msg["exe"], msg["attempt"], int(msg["pid"]))
        elif t == "exited":
            key = (msg["exe"], msg["attempt"])
            with self._lock:
                runner = self._runners.pop(key, None)
                if runner is not None and runner.agent is not None:
                    runner.agent.runners.pop(key, None)
            code = msg.get("code")
            pid = int(msg["pid"])
            self.sink.exited(msg["exe"], msg["attempt"], pid, -9 if code is None else code)
        elif t == "hello":
            agent.pid = int(msg.get("pid") or agent.pid)
            agent.server_pid = int(msg.get("server_pid") or agent.server_pid)
            self.greeted.add(agent.host)
        elif t == "server":
            agent.ready = True
            for error in msg.get("import_errors", []):  # the nodes fail with the traceback
                self.note(agent.host, f"the fork server could not import {error}")
        elif t == "bye":
            agent.bye = str(msg.get("reason", ""))
        elif t == "signal":  # (a Slurm step's SIGTERM: the backend's to act on)
            self.note(agent.host, f"its agent got {msg.get('name')} and goes on")
            if self.on_signal is not None:
                self.on_signal(agent.host, str(msg.get("name", "")))

    def logs(self, agent: Agent, chunks: Mapping[str, str]) -> None:
        """New lines of ``agent``'s logs, by label: a node's or an executable's into the
        run directory's log, the fork server's own into the agent's log."""
        for label, text in chunks.items():
            if label == SERVER_LOG:
                self.output.agent_output(agent.label, text)
            else:
                self.output.append(label, text)

    def agent_log(self, label: str) -> Path:
        return self.output.agent_log(label)

    def note(self, host: str, text: str) -> None:
        """A line from the launcher in ``host``'s agent log."""
        self.output.agent_output(self.transport.label(host), f"topo: {text}\n")

    # -- ends -------------------------------------------------------------------------
    def agent_ended(self, agent: Agent, how: str) -> None:
        """``agent``'s process ended (``how``: "was killed by SIGKILL"; any thread) while
        its host is fine: its attempts are lost (see the module's docstring)."""
        host, where = agent.host, self.transport.where(agent.host)
        what = f"the agent on {where}" + (f" (pid {agent.pid})" if agent.pid else "")
        what += f" {how}" + (f" ({agent.bye})" if agent.bye else "")
        see = f"see {agent_log_name(agent.label)}"
        limit = self.transport.quick_deaths
        with self._lock:
            if agent.dead:
                return
            agent.dead = True
            if self._agents.get(host) is agent:
                del self._agents[host]
            if self.closing or host in self.lost:
                return
            quick = time.monotonic() - agent.began < self.transport.quick_s
            deaths = self._quick[host] = self._quick.get(host, 0) + 1 if quick else 0
            give_up = limit is not None and deaths >= limit
            gone = [] if give_up else list(agent.runners.values())
            for r in gone:
                self._runners.pop((r.exe, r.attempt), None)
            agent.runners.clear()
            restart = not give_up and bool(self._waiting.get(host))
        if give_up:
            self.note(host, f"{what}; {where} is lost")
            self.lose_host(
                host,
                f"its agent died {deaths} times within {self.transport.quick_s:g}s of "
                f"starting (the last: {what}; {see})",
            )
            return
        self.note(host, f"{what}; a new agent starts there when one is needed")
        if self.transport.unready_fails and not agent.ready:
            self.sink.backend_failed(
                f"the topo agent on {where} failed before it could start executables: {how} ({see})"
            )
        for r in gone:
            reason = "" if r.killed else f"was lost: {what} ({see})"
            self.sink.exited(r.exe, r.attempt, r.pid, -9, reason)
        if restart:
            self._start_soon(host)

    def agent_unreachable(self, agent: Agent, why: str) -> None:
        """``agent`` cannot be reached any more (its channel broke, it went quiet; any
        thread): its host is lost, unless a later agent took its place."""
        with self._lock:
            current = self._agents.get(agent.host) is agent
            agent.dead = True
            if current and self.closing:
                del self._agents[agent.host]
        if current and not self.closing:
            self.lose_host(agent.host, why)

    def lose_host(self, host: str, why: str) -> None:
        """``host`` is lost for the rest of the run (any thread; once): its attempts sent
        there count as killed, so that their restart policy applies elsewhere; those still
        waiting for an agent there, or sent but not yet started, never ran, and start
        elsewhere without counting as failures. Nothing more goes there."""
        with self._lock:
            if host in self.lost or self.closing:
                return
            self.lost[host] = why
            agent = self._agents.pop(host, None)
            if agent is not None:
                agent.dead = True
            unsent = set(map(id, self._waiting.pop(host, [])))
            gone = [r for r in self._runners.values() if r.host == host]
            for r in gone:
                self._runners.pop((r.exe, r.attempt), None)
        self.transport.drop(host)
        where = self.transport.where(host)
        for r in gone:
            reason = "" if r.killed else f"was lost with {where}: {why}"
            # an attempt that had not said it started (pid 0) never ran there either
            ran = id(r) not in unsent and r.pid != 0
            self.sink.exited(r.exe, r.attempt, r.pid, -9, reason, started=ran)

    # -- the run ----------------------------------------------------------------------
    def update(self, job: JobContext) -> None:
        """``topo apply`` changed the program into ``job.program``: every agent takes it
        before this returns, and agents started from now on get it; the output of
        executables the change removed still finds its log."""
        with self._lock:
            self.output.changed(job)
            opening = list(self._opening.values())
        for lock in opening:  # an agent being started now is sent the change too
            with lock:
                pass
        self.transport.take_program(self.agents(), job)

    def close(self) -> None:
        """End every agent (its executables first) and take their last lines; no agent
        starts after this."""
        with self._lock:
            self.closing = True
            self._waiting.clear()
            self._held.clear()
            opening = list(self._opening.values())
        for lock in opening:
            with lock:
                pass
        with self._lock:
            agents = [a for a in self._agents.values() if a.link is not None]
        self.transport.shutdown(agents)
