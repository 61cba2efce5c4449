"""The launcher's side of the ray backend's node agents (``agent.NodeAgent``): one Ray
actor per Ray node that holds executables, forking that node's executables.

``start`` queues an attempt; the pool's thread sends the queue in batches, each attempt
to the agent of the node that holds its bundle (``groups.Reservations``), and starts an
agent on a node that has none yet (pinned there with ``NodeAffinitySchedulingStrategy``,
0 CPU: the executables' bundles hold their resources). The same thread keeps one
``poll`` in flight per agent and hands over what comes back: log lines into the run
directory (the fork server's own output into ``agents/<address>.log``), pids, exits.

An agent that dies (Ray raises ``ActorDiedError`` on its poll: killed, crashed, or its
node died) takes its executables: they are reported killed with why, and their restart
policy applies. When its node died, Ray moves the node's bundles to live nodes that fit,
and the restarts go there; when only the agent died, a new agent starts on the same
node. An agent whose fork server never became ready on a live node fails the run (that
node cannot run topo: said once, rather than restarting for ever).
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topo.backends.base import JobContext, Sink
from topo.backends.grants import exe_grant
from topo.backends.ray.agent import OWN_LOG, NodeAgent
from topo.backends.ray.groups import PLACEMENT_TIMEOUT_S, Reservations
from topo.backends.ray.runner import AgentRunner, first_line, why_dead
from topo.rundir.layout import AGENTS_DIR, agent_log_name, agent_log_path, exe_output_path

POLL_S = 0.1  # the pool's thread waits this long for answers, then sends what is queued
WAIT_S = 0.25  # an agent answers a poll within this (sooner when something happened)
RETRY_S = 0.5  # a poll Ray could not deliver (the agent is unreachable) is retried after
REFRESH_S = 0.5  # how often placement is read again while attempts wait for a live node
SHUTDOWN_S = 15.0  # at close, the agents have this long to end their executables
MAX_CONCURRENCY = 8  # poll + spawn + kill + stacks + shutdown at the same time
UPDATE_S = 60.0  # every agent takes a changed program within this (its fork server imports)


@dataclass(eq=False)
class _Agent:
    """One agent actor, and the attempts it was sent."""

    node: str  # the Ray node id
    ip: str
    name: str
    handle: Any
    runners: dict[tuple[str, int], AgentRunner] = field(default_factory=dict)
    poll_ref: Any = None
    retry_at: float = 0.0
    pid: int = 0
    server_pid: int = 0
    ready: bool = False  # its fork server imported the targets
    dead: bool = False
    unfit: str = ""  # why it was given up while alive (it did not take a changed program)


class AgentPool:
    """The agents of one run (see the module's docstring)."""

    def __init__(
        self,
        job: JobContext,
        sink: Sink,
        reservations: Reservations,
        init_ref: Any,
        namespace: str,
        append: Callable[[str, str], None],
    ) -> None:
        import ray

        self._job = job
        self._sink = sink
        self._reservations = reservations
        self._init_ref = init_ref
        self._namespace = namespace
        self._append = append
        self._class: Any = ray.remote(NodeAgent)
        self._queue: list[AgentRunner] = []
        self._agents: dict[str, _Agent] = {}  # Ray node id -> its live agent
        self._gone: list[_Agent] = []
        self._gen: dict[str, int] = {}  # Ray node id -> agents started there so far
        self._ips: dict[str, str] = {}  # Ray node id -> its address
        self._dead_nodes: set[str] = set()
        self._where: dict[str, str] = {}  # exe -> the address of its latest attempt's node
        self._next_refresh = 0.0
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run, name="topo-ray-agents", daemon=True)
        (job.run_dir / AGENTS_DIR).mkdir(exist_ok=True, mode=0o700)

    def open(self, exes: list[str]) -> None:
        """Start the agents of the nodes that hold ``exes`` (before their spawns come)."""
        self._read_nodes()
        for node in dict.fromkeys(self._reservations.node_of(e) for e in exes):
            if node is not None:
                self._agent(node)
        self._thread.start()

    def start(self, exe: str, attempt: int) -> AgentRunner:
        """Queue ``attempt`` of ``exe`` for its node's agent (sent within ``POLL_S``)."""
        runner = AgentRunner(self, exe, attempt, self._output(exe))
        with self._lock:
            self._queue.append(runner)
        return runner

    def location(self, exe: str) -> str | None:
        return self._where.get(exe)

    def pids(self) -> list[int]:
        """The live agents' processes and their fork servers (on their nodes)."""
        with self._lock:
            agents = list(self._agents.values())
        return [p for a in agents for p in (a.pid, a.server_pid) if p]

    def _output(self, exe: str) -> Path:
        return exe_output_path(self._job.run_dir, self._job.program.executable_index[exe])

    # -- agents ---------------------------------------------------------------------
    def _read_nodes(self) -> None:
        """The cluster's nodes: addresses, and which are dead."""
        import ray

        for node in ray.nodes():
            node_id = str(node.get("NodeID", ""))
            self._ips[node_id] = str(node.get("NodeManagerAddress", "?"))
            if not node.get("Alive"):
                self._dead_nodes.add(node_id)

    def _agent(self, node: str) -> _Agent:
        """The live agent of ``node``, started if it has none (in this pool's thread, or
        before it runs)."""
        agent = self._agents.get(node)
        if agent is not None:
            return agent
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        gen = self._gen[node] = self._gen.get(node, -1) + 1
        ip = self._ips.get(node, "?")
        name = f"agent@{ip}"
        if any(n != node and i == ip for n, i in self._ips.items()):  # several on one address
            name += f"/{node[:8]}"
        name += f"#{gen}" if gen else ""
        with self._lock:  # with the run's init as it is now (``update`` changes it)
            handle = self._class.options(
                name=name,
                namespace=self._namespace,
                num_cpus=0,  # the executables' bundles hold the resources
                max_restarts=0,  # a dead agent's executables follow their restart policy
                max_concurrency=MAX_CONCURRENCY,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(self._init_ref, f"{node[:12]}-{gen}")
            agent = self._agents[node] = _Agent(node, ip, name, handle)
        return agent

    def update(self, job: JobContext, init: dict[str, Any], init_ref: Any) -> None:
        """``topo apply`` changed the program into ``job.program`` (``init``: the run's
        init for it, put in Ray as ``init_ref``): every live agent takes it before this
        returns, and agents started from now on get it. An agent that cannot take it is
        not relied on any more (as when its poll fails: its executables count as lost)."""
        import ray

        with self._lock:
            self._job, self._init_ref = job, init_ref
            agents = [a for a in self._agents.values() if not a.dead]
        args = (init["program_json"], init["modules"], init["threads"])
        calls = {a.handle.take_program.remote(*args): a for a in agents}
        if calls:
            ray.wait(list(calls), num_returns=len(calls), timeout=UPDATE_S)
        for ref, agent in calls.items():
            try:
                ray.get(ref, timeout=0)
            except Exception as exc:  # its poll fails next: the pool's thread says why
                agent.unfit = f"it did not take the changed program: {first_line(exc)}"
                ray.kill(agent.handle, no_restart=True)

    def _note(self, agent: _Agent, text: str) -> None:
        """Text in ``agents/<address>.log`` of ``agent``'s node."""
        path = agent_log_path(self._job.run_dir, agent.ip)
        with open(path, "a") as log:
            log.write(text)

    # -- the pool's thread ------------------------------------------------------------
    def _run(self) -> None:
        """Send what is queued, take what the agents answer; one bad round is reported."""
        while not self._closed.is_set():
            try:
                self._dispatch()
                self._poll()
            except Exception as exc:
                print(f"topo: ray backend: agents: {exc!r}", file=sys.stderr, flush=True)
                self._closed.wait(POLL_S)

    def _dispatch(self) -> None:
        """Each queued attempt to its node's agent, in one call per agent; those whose
        bundle is on no live node yet wait (placement read again), up to a limit."""
        with self._lock:
            queue, self._queue = self._queue, []
        batches: dict[_Agent, list[tuple[str, int, str]]] = {}
        waiting: list[AgentRunner] = []
        stopped: list[AgentRunner] = []
        for runner in queue:
            node = self._reservations.node_of(runner.exe)
            if node is None or node in self._dead_nodes:
                waiting.append(runner)
                continue
            agent = self._agent(node)
            with self._lock:
                if runner.killed:
                    stopped.append(runner)
                    continue
                runner.agent = agent
                agent.runners[(runner.exe, runner.attempt)] = runner
            self._where[runner.exe] = agent.ip
            grant = exe_grant(self._job, runner.exe).to_json()
            batches.setdefault(agent, []).append((runner.exe, runner.attempt, grant))
        for agent, attempts in batches.items():
            agent.handle.spawn.remote(attempts)
        for runner in stopped:
            self._sink.exited(runner.exe, runner.attempt, 0, -9, "was stopped before it started")
        if waiting:
            self._wait_for_placement(waiting)

    def _wait_for_placement(self, waiting: list[AgentRunner]) -> None:
        """Attempts whose bundle is on no live node: back in the queue, or given up."""
        now = time.monotonic()
        with self._lock:
            stopped = [r for r in waiting if r.killed]
            late = [r for r in waiting if not r.killed and now - r.queued_at > PLACEMENT_TIMEOUT_S]
            self._queue[:0] = [r for r in waiting if r not in late and r not in stopped]
        for r in stopped:
            self._sink.exited(r.exe, r.attempt, 0, -9, "was stopped before it started")
        for r in late:
            why = f"no live Ray node took its reserved resources within {PLACEMENT_TIMEOUT_S:g}s"
            self._sink.exited(r.exe, r.attempt, 0, -9, f"could not start: {why}")
        if now >= self._next_refresh:
            self._next_refresh = now + REFRESH_S
            self._read_nodes()
            self._reservations.refresh()

    def _poll(self) -> None:
        """One ``poll`` in flight per agent; take the answers that came within POLL_S."""
        import ray

        now = time.monotonic()
        refs: dict[Any, _Agent] = {}
        for agent in list(self._agents.values()):
            if agent.poll_ref is None and now >= agent.retry_at:
                agent.poll_ref = agent.handle.poll.remote(WAIT_S)
            if agent.poll_ref is not None:
                refs[agent.poll_ref] = agent
        if not refs:
            self._closed.wait(POLL_S)
            return
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=POLL_S)
        for ref in ready:
            self._answer(refs[ref], ref)

    def _answer(self, agent: _Agent, ref: Any) -> None:
        """One agent's answer to a poll, or how it died."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        agent.poll_ref = None
        try:
            answer = ray.get(ref)
        except ActorUnavailableError:  # unreachable for now: Ray says when it is dead
            agent.retry_at = time.monotonic() + RETRY_S
            return
        except RayActorError as exc:
            self._lost(agent, agent.unfit or why_dead(exc))
            return
        except Exception as exc:  # the agent could not answer: it cannot be relied on
            self._lost(agent, f"its poll failed: {first_line(exc)}")
            return
        self._take_logs(agent, answer["logs"])
        for msg in answer["news"]:
            self._news(agent, msg)

    def _take_logs(self, agent: _Agent, logs: dict[str, str]) -> None:
        for label, text in logs.items():
            if label == OWN_LOG:
                self._note(agent, text)
            else:
                self._append(label, text)

    def _news(self, agent: _Agent, msg: dict[str, Any]) -> None:
        t = msg.get("t")
        if t == "agent":
            agent.pid, agent.server_pid = int(msg["pid"]), int(msg["server_pid"])
        elif t == "server":
            agent.ready = True
            for error in msg.get("import_errors", []):  # the nodes fail with the traceback
                self._note(agent, f"topo: the fork server could not import {error}\n")
        elif t == "started":
            runner = agent.runners.get((msg["exe"], msg["attempt"]))
            if runner is not None:
                runner.pid = int(msg["pid"])
            self._sink.started(msg["exe"], msg["attempt"], int(msg["pid"]))
        elif t == "exited":
            with self._lock:
                agent.runners.pop((msg["exe"], msg["attempt"]), None)
            code = msg.get("code")
            self._sink.exited(
                msg["exe"], msg["attempt"], int(msg["pid"]), -9 if code is None else code
            )
        elif t == "server_ended":
            self._lost(agent, f"its fork server {msg.get('how', 'ended')}")

    def _lost(self, agent: _Agent, why: str) -> None:
        """``agent`` died (or its fork server did): its executables count as killed."""
        import ray

        with self._lock:
            if agent.dead:
                return
            agent.dead = True
            if self._agents.get(agent.node) is agent:
                del self._agents[agent.node]
            self._gone.append(agent)
            runners = list(agent.runners.values())
            agent.runners.clear()
        try:
            ray.kill(agent.handle, no_restart=True)
        except Exception:  # gone already
            pass
        if self._closing:
            return
        self._read_nodes()
        pid = f" (pid {agent.pid})" if agent.pid else ""
        if agent.node in self._dead_nodes:
            how = f"was lost with Ray node {agent.ip}, which Ray declared dead"
            self._next_refresh = 0.0  # Ray moves the node's bundles: read where to
        else:
            how = f"was lost with the topo agent on Ray node {agent.ip}{pid}: {why}"
        self._note(agent, f"topo: the agent {agent.name}{pid} ended: {why}\n")
        if not agent.ready and agent.node not in self._dead_nodes:
            see = f"see {agent_log_name(agent.ip)}"
            self._sink.backend_failed(
                f"the topo agent on Ray node {agent.ip} failed before it could start "
                f"executables: {why} ({see})"
            )
        for r in runners:
            self._sink.exited(r.exe, r.attempt, r.pid, -9, "" if r.killed else how)

    # -- calls from the launcher ------------------------------------------------------
    def kill(self, runner: AgentRunner) -> None:
        """End ``runner``'s attempt: dropped from the queue, or killed by its agent."""
        with self._lock:
            runner.killed = True
            queued = runner in self._queue
            if queued:
                self._queue.remove(runner)
            agent = runner.agent
        if queued:
            self._sink.exited(runner.exe, runner.attempt, 0, -9, "was stopped before it started")
        elif agent is not None and not agent.dead:  # None: being sent (it sees .killed)
            agent.handle.kill.remote(runner.exe, runner.attempt)

    def close(self) -> None:
        """Stop the pool's thread; each agent ends its executables and fork server and
        hands over its last lines; then the agents are killed."""
        import ray

        self._closing = True
        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(5)
        with self._lock:
            agents = list(self._agents.values())
            self._agents.clear()
        if not ray.is_initialized():  # after ray.shutdown every actor is gone
            return
        calls: list[tuple[Any, _Agent, bool]] = []
        for agent in agents:
            if agent.poll_ref is not None:  # its lines read already: take them
                calls.append((agent.poll_ref, agent, True))
            calls.append((agent.handle.shutdown.remote(), agent, False))
        if calls:
            ray.wait([c for c, _, _ in calls], num_returns=len(calls), timeout=SHUTDOWN_S)
        for ref, agent, polled in calls:
            try:
                answer = ray.get(ref, timeout=0)
            except Exception:  # gone, or too slow: its last lines are lost
                continue
            self._take_logs(agent, answer["logs"] if polled else answer)
        for agent in [*agents, *self._gone]:
            try:
                ray.kill(agent.handle, no_restart=True)
            except Exception:
                pass
