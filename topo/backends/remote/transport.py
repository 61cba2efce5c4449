"""The seam between the remote core and a remote backend: how the backend reaches the
agent of one of its hosts (``Transport``), and what it tells the core (``Reports``).

A backend's transport starts an agent on a host (``open_agent``: an SSH channel running
the stream agent, a Ray actor pinned to a node, an ``srun`` step), carries the
launcher's requests to it (``spawn``, ``kill``, ``stacks``, ``take_program``,
``shutdown``), and hands what comes back to its fleet (``Reports``): ``message`` (the
agent's reports), ``logs`` (new lines of its logs), ``agent_ended`` (the agent's process
ended, its host is fine), ``agent_unreachable`` and ``lose_host`` (the host is gone for
the run). Everything else -- runners, pending spawns, grants, output, how an end is
reported, replacing agents -- is the fleet's (``fleet.Fleet``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from topo.backends.base import JobContext
from topo.backends.remote.records import Agent, Attempt


def run_init(job: JobContext, accelerator_ids: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What every agent of the run is started with, whatever the backend (which may add
    its own keys): the program as JSON, the registry's public info, the target modules,
    and the accelerators placement gave its executables (``device_plan.init_ids``)."""
    from topo.backends.worker import target_modules
    from topo.ir import dumps

    return {
        "program_json": dumps(job.program),
        "registry": vars(job.registry).copy(),
        "disable_run": job.options.disable_run,
        "modules": target_modules(job.program),
        "accelerator_ids": dict(accelerator_ids or {}),
    }


class Reports(ABC):
    """What a transport tells the launcher's side of the core (``fleet.Fleet``) about
    its agents (any thread; each returns soon)."""

    closing: bool  # the run ends: what agents do now is no news

    @abstractmethod
    def message(self, agent: Agent, msg: Mapping[str, Any]) -> None:
        """One report of ``agent`` (``remote.stream``'s vocabulary)."""

    @abstractmethod
    def logs(self, agent: Agent, chunks: Mapping[str, str]) -> None:
        """New lines of ``agent``'s logs, by label."""

    @abstractmethod
    def agent_ended(self, agent: Agent, how: str) -> None:
        """``agent``'s process ended (``how``: "was killed by SIGKILL") while its host is fine."""

    @abstractmethod
    def agent_unreachable(self, agent: Agent, why: str) -> None:
        """``agent`` cannot be reached any more: its host is lost."""

    @abstractmethod
    def lose_host(self, host: str, why: str) -> None:
        """``host`` is lost for the rest of the run."""

    @abstractmethod
    def agent_log(self, label: str) -> Path:
        """The path of an agent log in the run directory (``agents/<label>.log``)."""

    @abstractmethod
    def agents(self) -> list[Agent]:
        """The agents started and not known to have ended."""


class Transport(ABC):
    """How a remote backend reaches the agents on its hosts (see the module's docstring).
    Calls come from the launcher's threads and the fleet's; each must return soon."""

    fleet: Reports  # where it reports (the fleet, which sets this when it is made)
    quick_deaths: int | None = None  # this many quick deaths of a host's agents in a row:
    quick_s: float = 5.0  # (each within quick_s of its start) the host is lost; None: never
    unready_fails: bool = False  # an agent that ends before its fork server was ready fails the run
    # executable -> the indexes of the accelerators placement gave it on its host (the
    # backend sets it before the agents start, and again before a change is taken)
    accelerator_ids: Mapping[str, str] = {}

    def where(self, host: str) -> str:
        """``host`` in a sentence: "host h1", "Ray node 10.0.0.3"."""
        return f"host {host}"

    def label(self, host: str) -> str:
        """The name of ``host``'s agent log in the run directory (``agents/<label>.log``)."""
        return host

    @abstractmethod
    def open_agent(self, agent: Agent, job: JobContext) -> Any:
        """Start ``agent`` on its host with the run's init for ``job``, and return its
        link; requests may be sent to it at once (they wait in order until it is up).
        Raises when it cannot start (the message says why)."""

    @abstractmethod
    def spawn(self, agent: Agent, attempts: list[Attempt]) -> None:
        """Have ``agent`` fork these attempts, each with its grant."""

    @abstractmethod
    def kill(self, agent: Agent, exe: str, attempt: int) -> None:
        """Have ``agent`` SIGKILL an attempt's process group (at once, or at its fork)."""

    @abstractmethod
    def stacks(self, agent: Agent, exe: str, attempt: int) -> bool:
        """Have ``agent`` make an attempt dump its stacks into its log; whether it was asked."""

    @abstractmethod
    def take_program(self, agents: list[Agent], job: JobContext) -> None:
        """``topo apply`` changed the program into ``job.program``: every one of
        ``agents`` forks it from now on (one that cannot is to be reported ended)."""

    @abstractmethod
    def shutdown(self, agents: list[Agent]) -> None:
        """The run ends: each of ``agents`` ends its executables and fork server (their
        last log lines go to the fleet), then the agent itself."""

    def drop(self, host: str) -> None:
        """``host`` is lost for the run: release what reaches it (nothing by default)."""
        return None


AGENT_MODULE = "topo.backends.remote.stream"  # the stream agent, run with ``python -m``


class StreamLink(Protocol):
    """One stream agent's pipe pair as the launcher holds it (an SSH channel, an srun)."""

    ended: bool

    def send(self, **msg: Any) -> None:
        """One request, a JSON line on the agent's stdin."""

    def close(self) -> None:
        """EOF to the agent (it ends what it started), then wait for it to go."""


class StreamTransport(Transport):
    """A transport whose agents are the stream agent (``remote.stream``) behind a
    ``StreamLink``: the requests are the same JSON lines whatever carries them, so the
    ssh and slurm backends differ only in how an agent is started (``open_agent``)."""

    quick_deaths = 3  # an agent that dies within quick_s of its start 3 times in a row:
    quick_s = 5.0  # its host is lost

    def spawn(self, agent: Agent, attempts: list[Attempt]) -> None:
        for exe, attempt, grant in attempts:
            agent.link.send(t="spawn", exe=exe, attempt=attempt, grant=grant)

    def kill(self, agent: Agent, exe: str, attempt: int) -> None:
        agent.link.send(t="kill", exe=exe, attempt=attempt)

    def stacks(self, agent: Agent, exe: str, attempt: int) -> bool:
        if agent.link.ended:
            return False
        agent.link.send(t="stacks", exe=exe, attempt=attempt)
        return True

    def take_program(self, agents: list[Agent], job: JobContext) -> None:
        init = run_init(job, self.accelerator_ids)
        for agent in agents:
            if not agent.link.ended:
                agent.link.send(
                    t="program",
                    program_json=init["program_json"],
                    modules=init["modules"],
                    accelerator_ids=init["accelerator_ids"],
                )

    def shutdown(self, agents: list[Agent]) -> None:
        for agent in agents:
            agent.link.send(t="shutdown")
        for agent in agents:
            agent.link.close()
