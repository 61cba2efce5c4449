"""How the ssh backend reaches a host's agent: ``SshAgents``, the ``Transport`` of the
remote core (``topo.backends.remote``) over SSH.

An agent is the stream agent (``python -m topo.backends.remote.stream``) run on its host
over one SSH channel of the host's connection (``session.Channel``), with the nodes'
path the host check found (``prepare.Prepared``). Requests are JSON lines on its stdin;
its reports come back on its stdout and go to the fleet, its stderr into the host's
agent log. The channel tells how the agent ended: sshd reports its exit status or
signal (the agent ended, the host is fine), or the channel broke or went quiet for the
lease (the host is lost).
"""

from __future__ import annotations

from typing import Any

from topo.backends.base import JobContext
from topo.backends.remote.records import Agent
from topo.backends.remote.transport import AGENT_MODULE, StreamTransport, run_init
from topo.backends.ssh.inventory import HostSpec
from topo.backends.ssh.prepare import Prepared
from topo.backends.ssh.rundirs import remote_run_dir


class SshAgents(StreamTransport):
    """The agents of one ssh run, one SSH channel each (see the module's docstring)."""

    def __init__(
        self, sessions: Any, hosts: dict[str, HostSpec], prepared: Prepared, lease_s: float
    ) -> None:
        self.sessions = sessions  # session.Sessions: the hosts' connections
        self.hosts = hosts
        self.prepared = prepared
        self.lease_s = lease_s

    def open_agent(self, agent: Agent, job: JobContext) -> Any:
        from topo.backends.ssh.session import describe_error

        spec = self.hosts[agent.host]
        fleet = self.fleet
        try:
            channel = self.sessions.open_channel(
                agent.host,
                self.prepared.command(spec, ["-m", AGENT_MODULE]),
                lambda msg: fleet.message(agent, msg),
                lambda why: fleet.agent_unreachable(agent, why),
                fleet.agent_log(agent.label),
                self.lease_s,
                on_died=lambda how: fleet.agent_ended(agent, how),
            )
        except Exception as exc:  # the connection broke
            raise RuntimeError(describe_error(exc)) from None
        run_dir = remote_run_dir(spec, job.run_dir.name)
        init = {**run_init(job, self.accelerator_ids), "lease_s": self.lease_s}
        channel.send(t="init", host=agent.host, address=spec.address, run_dir=run_dir, **init)
        return channel

    def drop(self, host: str) -> None:
        """Nothing more goes to ``host`` this run: its SSH connection is closed."""
        self.sessions.drop(host)
