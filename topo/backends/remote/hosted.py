"""What the backends on the remote core (ssh, slurm) share once they run: starting an
executable on a live host its placement picks, and what the run knows of its hosts
(lost ones, agents restarted, agents' pids, where each executable is)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

from topo.backends.base import Backend, ExecutableRunner
from topo.backends.remote.fleet import Fleet


class HostPlacement(Protocol):
    """Where executables go among named hosts (``ssh.placement.Placement``)."""

    def where(self, exe_id: str) -> str | None:
        """The host ``exe_id`` runs on."""

    def relocate(self, exe_id: str, alive: Collection[str]) -> str | None:
        """The host ``exe_id`` (re)starts on among the ``alive`` ones; None: none fits."""


class HostedBackend(Backend):
    """A backend whose executables run through a ``Fleet`` of agents on named hosts."""

    fleet: Fleet | None = None  # the agents, once open
    placement: HostPlacement | None = None
    host_word = "host"  # how the refusal to start names a host ("node of the job")

    def host_names(self) -> Collection[str]:
        """The hosts of the run, up or not."""
        raise NotImplementedError

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        assert self.placement is not None and self.fleet is not None
        runner = self.fleet.runner(exe, attempt)
        host = self.placement.relocate(exe, self.fleet.hosts_up(self.host_names()))
        if host is None:
            self.fleet.refuse(runner, f"cannot start: no live {self.host_word} fits it")
        else:
            self.fleet.send([(runner, host)])
        return runner

    @property
    def lost(self) -> dict[str, str]:
        """Host -> why it was lost for the run."""
        return {} if self.fleet is None else self.fleet.lost

    @property
    def agent_restarts(self) -> dict[str, int]:
        """Host -> new agents started there after one ended."""
        return {} if self.fleet is None else self.fleet.restarts

    def agent_pids(self) -> dict[str, int]:
        """Host -> pid (on that host) of its current agent, for hosts whose agent is up."""
        return {} if self.fleet is None else self.fleet.agent_pids()

    def location(self, exe: str) -> str | None:
        return None if self.placement is None else self.placement.where(exe)
