"""How the ray backend reaches a Ray node's agent: ``RayAgents``, the ``Transport`` of
the remote core (``topo.backends.remote``) over Ray, and the thread that drives it.

An agent is a ``agent.NodeAgent`` actor pinned to its node (``NodeAffinitySchedulingStrategy``,
0 CPU: the executables' bundles hold their resources; no Ray restarts: a dead agent's
executables follow topo's restart policy). The thread places what the fleet holds --
each attempt goes to the node that holds its bundle (``groups.Reservations``); one
whose bundle is on no live node yet waits, placement read again, up to a limit -- and
keeps one ``poll`` in flight per agent, handing what comes back to the fleet.

An agent that dies (Ray raises on its poll: killed, crashed, or its node died) is
reported ended, its host fine, unless Ray declared its node dead: then the node is lost
for the run, and Ray moves the node's bundles to live nodes that fit, where the
restarts go. An agent whose fork server never became ready on a live node fails the
run (that node cannot run topo: said once, rather than restarting for ever).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

from topo.backends.base import JobContext
from topo.backends.ray.agent import NodeAgent
from topo.backends.ray.groups import PLACEMENT_TIMEOUT_S, Reservations
from topo.backends.ray.runner import first_line, why_dead
from topo.backends.ray.session import actor_runtime_env
from topo.backends.ray.update import RayInits
from topo.backends.remote.fleet import Fleet
from topo.backends.remote.records import Agent, Attempt, RemoteRunner
from topo.backends.remote.transport import Transport

POLL_S = 0.1  # the thread waits this long for answers, then sends what is held
WAIT_S = 0.25  # an agent answers a poll within this (sooner when something happened)
RETRY_S = 0.5  # a poll Ray could not deliver (the agent is unreachable) is retried after
REFRESH_S = 0.5  # how often placement is read again while attempts wait for a live node
SHUTDOWN_S = 15.0  # at close, the agents have this long to end their executables
MAX_CONCURRENCY = 8  # poll + spawn + kill + stacks + shutdown at the same time
UPDATE_S = 60.0  # every agent takes a changed program within this (its fork server imports)


class RayAgents(Transport):
    """The agents of one Ray run, one actor per Ray node (see the module's docstring)."""

    unready_fails = True

    def __init__(self, reservations: Reservations, namespace: str, inits: RayInits) -> None:
        import ray

        self._reservations = reservations
        self._namespace = namespace
        self._inits = inits
        self._class: Any = ray.remote(NodeAgent)
        self._ips: dict[str, str] = {}  # Ray node id -> its address
        self._dead_nodes: set[str] = set()
        self._where: dict[str, str] = {}  # exe -> the address of its latest attempt's node
        self._polls: dict[Agent, Any] = {}  # agent -> its poll in flight
        self._retry_at: dict[Agent, float] = {}
        self._unfit: dict[Agent, str] = {}  # why it was given up while alive
        self._handles: list[Any] = []  # every agent actor started (killed at the end)
        self._next_refresh = 0.0
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topo-ray-agents", daemon=True)

    @property
    def _fleet(self) -> Fleet:
        """The fleet, which this transport also places attempts through (its thread)."""
        assert isinstance(self.fleet, Fleet)
        return self.fleet

    def open(self, exes: list[str]) -> None:
        """Start the agents of the nodes that hold ``exes`` (before their spawns come),
        then the thread."""
        self._read_nodes()
        nodes = dict.fromkeys(self._reservations.node_of(e) for e in exes)
        self._fleet.open(n for n in nodes if n is not None)
        self._thread.start()

    def location(self, exe: str) -> str | None:
        return self._where.get(exe)

    def where(self, host: str) -> str:
        return f"Ray node {self.label(host)}"

    def label(self, host: str) -> str:
        return self._ips.get(host, "?")

    def _read_nodes(self) -> None:
        """The cluster's nodes: addresses, and which are dead."""
        import ray

        for node in ray.nodes():
            node_id = str(node.get("NodeID", ""))
            self._ips[node_id] = str(node.get("NodeManagerAddress", "?"))
            if not node.get("Alive"):
                self._dead_nodes.add(node_id)

    # -- the transport ----------------------------------------------------------------
    def open_agent(self, agent: Agent, job: JobContext) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node, ip = agent.host, self.label(agent.host)
        name = f"agent@{ip}"
        if any(n != node and i == ip for n, i in self._ips.items()):  # several on one address
            name += f"/{node[:8]}"
        name += f"#{agent.gen}" if agent.gen else ""
        handle = self._class.options(
            name=name,
            namespace=self._namespace,
            num_cpus=0,  # the executables' bundles hold the resources
            max_restarts=0,  # a dead agent's executables follow their restart policy
            max_concurrency=MAX_CONCURRENCY,
            runtime_env=actor_runtime_env(),
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
        ).remote(self._inits.get(job)[1], f"{node[:12]}-{agent.gen}")
        self._handles.append(handle)
        return handle

    def spawn(self, agent: Agent, attempts: list[Attempt]) -> None:
        agent.link.spawn.remote(attempts)

    def kill(self, agent: Agent, exe: str, attempt: int) -> None:
        agent.link.kill.remote(exe, attempt)

    def stacks(self, agent: Agent, exe: str, attempt: int) -> bool:
        import ray

        try:  # a busy machine can take seconds to schedule the agent's answer
            return bool(ray.get(agent.link.stacks.remote(exe, attempt), timeout=10))
        except Exception:
            return False

    def take_program(self, agents: list[Agent], job: JobContext) -> None:
        """Every agent takes the change before this returns; one that cannot is not relied
        on any more (killed: its poll fails next, and its executables count as lost)."""
        import ray

        init = self._inits.get(job)[0]
        args = (init["program_json"], init["modules"], init["threads"])
        calls = {a.link.take_program.remote(*args): a for a in agents}
        if calls:
            ray.wait(list(calls), num_returns=len(calls), timeout=UPDATE_S)
        for ref, agent in calls.items():
            try:
                ray.get(ref, timeout=0)
            except Exception as exc:
                self._unfit[agent] = f"did not take the changed program: {first_line(exc)}"
                ray.kill(agent.link, no_restart=True)

    def shutdown(self, agents: list[Agent]) -> None:
        """Stop the thread; each agent ends its executables and fork server and hands over
        its last lines; then every agent is killed."""
        import ray

        self._closed.set()
        if self._thread.is_alive():
            self._thread.join(5)
        if not ray.is_initialized():  # after ray.shutdown every actor is gone
            return
        calls: list[tuple[Any, Agent, bool]] = []
        for agent in agents:
            poll = self._polls.get(agent)
            if poll is not None:  # its lines read already: take them
                calls.append((poll, agent, True))
            calls.append((agent.link.shutdown.remote(), agent, False))
        if calls:
            ray.wait([c for c, _, _ in calls], num_returns=len(calls), timeout=SHUTDOWN_S)
        for ref, agent, polled in calls:
            try:
                answer = ray.get(ref, timeout=0)
            except Exception:  # gone, or too slow: its last lines are lost
                continue
            self.fleet.logs(agent, answer["logs"] if polled else answer)
        for handle in self._handles:
            try:
                ray.kill(handle, no_restart=True)
            except Exception:
                pass

    # -- the thread -------------------------------------------------------------------
    def _run(self) -> None:
        """Send what is held, take what the agents answer; one bad round is reported."""
        while not self._closed.is_set():
            try:
                self._dispatch()
                self._poll()
            except Exception as exc:
                print(f"topo: ray backend: agents: {exc!r}", file=sys.stderr, flush=True)
                self._closed.wait(POLL_S)

    def _dispatch(self) -> None:
        """Each held attempt to the node that holds its bundle; those whose bundle is on
        no live node yet wait (placement read again), up to a limit."""
        placed: list[tuple[RemoteRunner, str]] = []
        waiting: list[RemoteRunner] = []
        for runner in self._fleet.take_held():
            node = self._reservations.node_of(runner.exe)
            if node is None or node in self._dead_nodes:
                waiting.append(runner)
                continue
            self._where[runner.exe] = self.label(node)
            placed.append((runner, node))
        self._fleet.send(placed)
        if not waiting:
            return
        now = time.monotonic()
        late = [r for r in waiting if now - r.queued_at > PLACEMENT_TIMEOUT_S]
        self._fleet.hold_again([r for r in waiting if r not in late])
        why = f"no live Ray node took its reserved resources within {PLACEMENT_TIMEOUT_S:g}s"
        for r in late:
            self._fleet.refuse(r, f"could not start: {why}")
        if now >= self._next_refresh:
            self._next_refresh = now + REFRESH_S
            self._read_nodes()
            self._reservations.refresh()

    def _poll(self) -> None:
        """One ``poll`` in flight per agent; take the answers that came within POLL_S."""
        import ray

        now = time.monotonic()
        refs: dict[Any, Agent] = {}
        for agent in self.fleet.agents():
            if agent not in self._polls and now >= self._retry_at.get(agent, 0.0):
                self._polls[agent] = agent.link.poll.remote(WAIT_S)
            if agent in self._polls:
                refs[self._polls[agent]] = agent
        if not refs:
            self._closed.wait(POLL_S)
            return
        ready, _ = ray.wait(list(refs), num_returns=len(refs), timeout=POLL_S)
        for ref in ready:
            self._answer(refs[ref], ref)

    def _answer(self, agent: Agent, ref: Any) -> None:
        """One agent's answer to a poll, or how it died."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        del self._polls[agent]
        try:
            answer = ray.get(ref)
        except ActorUnavailableError:  # unreachable for now: Ray says when it is dead
            self._retry_at[agent] = time.monotonic() + RETRY_S
            return
        except RayActorError as exc:
            self._ended(agent, self._unfit.get(agent) or f"died: {why_dead(exc)}")
            return
        except Exception as exc:  # the agent could not answer: it cannot be relied on
            self._ended(agent, f"could not answer: {first_line(exc)}")
            return
        self.fleet.logs(agent, answer["logs"])
        for msg in answer["news"]:
            if msg.get("t") == "server_ended":
                self._ended(agent, f"lost its fork server, which {msg.get('how', 'ended')}")
            else:
                self.fleet.message(agent, msg)

    def _ended(self, agent: Agent, how: str) -> None:
        """``agent`` died (or its fork server did): lost with its node if Ray declared
        that dead, else ended on a node that is fine."""
        import ray

        try:
            ray.kill(agent.link, no_restart=True)
        except Exception:  # gone already
            pass
        self._polls.pop(agent, None)
        self._retry_at.pop(agent, None)
        if self.fleet.closing:
            return
        self._read_nodes()
        if agent.host in self._dead_nodes:
            self._next_refresh = 0.0  # Ray moves the node's bundles: read where to
            self.fleet.lose_host(agent.host, "Ray declared it dead")
        else:
            self.fleet.agent_ended(agent, how)
