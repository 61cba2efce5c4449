"""The program registry: networked address book and stop channel.

The launcher runs one ``RegistryServer`` per program run (loopback for local
backends). It is itself a topo node server (same auth, same wire) with
methods ``register``/``unregister``/``lookup``/``request_stop``/``stop_reason``
``report`` (node status for the launcher, the same channel on every backend) and
``metrics`` (rows of scalars from ``topo.metrics`` loggers, for the launcher's store),
plus an authenticated PUB socket on which it announces a stop (repeated
while the program is stopping, so late subscribers hear it too), a new membership
generation of the program's groups and the executables asked to end their nodes
(``topo apply``; both repeated too). Every node process uses a ``RegistryClient`` as
its ``AddressBook``; it keeps the process's whole-group handles current
(``topo.runtime.membership``).

The registry knows which executable calls it (its member key, see ``rights``): an
executable may register, unregister and report only the nodes it runs, and send
metrics only for them; looking nodes up and stopping the program are open to all.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass, field, replace

import zmq

from topo.runtime import transport
from topo.runtime.addressbook import InProcessAddressBook
from topo.runtime.auth import Mechanism, ServerAuth, secure_server, zmq_context
from topo.runtime.context import DEFAULT_DEADLINE, NodeInfo, ProgramContext
from topo.runtime.registry_service import (
    MAX_METRIC_ROWS,
    MetricsHandler,
    RegistryService,
    ReportHandler,
)
from topo.runtime.rights import REGISTRY_ID, Authority, zap_domain
from topo.runtime.server import NodeServer

log = logging.getLogger("topo.runtime.registry")
__all__ = [
    "MAX_METRIC_ROWS",
    "REGISTRY_ID",
    "MetricsHandler",
    "RegistryInfo",
    "RegistryServer",
    "RegistryService",
    "ReportHandler",
]
STOP_TOPIC = b"topo-stop"
MEMBERS_TOPIC = b"topo-members"  # the membership generation changed (topo apply)
END_TOPIC = b"topo-end"  # an executable is to end its nodes (topo apply removes or restarts it)
ANNOUNCE_S = 10.0  # a new membership generation is announced this long (late subscribers)
STOP_CALL_TIMEOUT_S = 5.0  # a stop request waits this long for the registry at most
METRICS_TIMEOUT_S = 10.0  # a node's metrics call gives up sooner than its RPC deadline
REGISTRY_MAX_MESSAGE_BYTES = 1 << 20  # the largest request the registry accepts


@dataclass(frozen=True)
class RegistryInfo:
    """Everything a process needs to join a program (picklable). With the ``secret``
    (the launcher's) it may call every node; ``public()`` is what executables get, with
    their own ``Grant``."""

    program_id: str
    secret: str = field(repr=False)
    endpoint: str
    pub_endpoint: str
    mechanism: Mechanism = "plain"
    default_deadline: float = DEFAULT_DEADLINE
    bind_host: str = "127.0.0.1"
    ipc_dir: str | None = None
    server_key: str = ""  # the registry's CURVE public key (Z85)

    def public(self) -> RegistryInfo:
        """This without the program secret: for processes that get a ``Grant``."""
        return replace(self, secret="")


class RegistryServer:
    """Runs a program's registry; the launcher owns it.

    With PLAIN (one host) the registry makes the run's private socket directory, unless
    given one in ``ipc_dir``, and removes it on ``close``; with CURVE it listens on TCP.
    ``on_report`` receives the node status that executables send with
    ``RegistryClient.report``, ``on_metrics`` the metric rows of ``RegistryClient.metrics``.
    ``members`` (executable id -> its nodes) are the executables that may join with a
    ``Grant`` from ``authority``; the holders of the secret join as the launcher."""

    def __init__(
        self,
        program_id: str,
        secret: str,
        *,
        mechanism: Mechanism = "plain",
        bind_host: str = "127.0.0.1",
        advertise_host: str | None = None,
        default_deadline: float = DEFAULT_DEADLINE,
        threads: int = 4,
        ipc_dir: str | None = None,
        on_report: ReportHandler | None = None,
        on_metrics: MetricsHandler | None = None,
        members: dict[str, tuple[str, ...]] | None = None,
    ) -> None:
        self.stop_event = threading.Event()
        self._closed = threading.Event()
        self.authority = Authority(program_id, secret, members)
        self._own_dir: str | None = None
        if mechanism == "plain" and ipc_dir is None:
            ipc_dir = self._own_dir = transport.make_ipc_dir(owned=False)
        if ipc_dir is not None:
            transport.check_ipc_dir(ipc_dir)
        self._program = ProgramContext(
            program_id,
            secret,
            InProcessAddressBook(),
            default_deadline,
            mechanism,
            bind_host,
            ipc_dir,
        )
        self.service = RegistryService(self._on_stop, on_report, on_metrics, self.authority)
        auth = ServerAuth(
            zap_domain(program_id, REGISTRY_ID),
            self.authority.member_of,
            self.authority.server_secret(REGISTRY_ID),
            "the registry",
        )
        self._server = NodeServer(
            self.service,
            NodeInfo(REGISTRY_ID, REGISTRY_ID),
            self._program,
            threads=threads,
            max_message_bytes=REGISTRY_MAX_MESSAGE_BYTES,
            register=False,
            advertise_host=advertise_host,
            track=False,
            auth=auth,
            identify=True,
        )
        pub = zmq_context().socket(zmq.PUB)
        pub.linger = 0
        secure_server(pub, mechanism, auth)
        pub_endpoint = transport.bind(
            pub, ipc_dir=ipc_dir, bind_host=bind_host, advertise_host=advertise_host
        )
        self.info = RegistryInfo(
            program_id,
            secret,
            self._server.endpoint,
            pub_endpoint,
            mechanism,
            default_deadline,
            bind_host,
            ipc_dir,
            self.authority.server_public(REGISTRY_ID),
        )
        self._announce_until = 0.0  # monotonic: announce the membership generation until then
        self._publisher = threading.Thread(
            target=self._publish, args=(pub,), name="topo-registry-pub", daemon=True
        )
        self._publisher.start()

    @property
    def endpoint(self) -> str:
        """The registry's RPC endpoint."""
        return self.info.endpoint

    def stop_reason(self) -> tuple[str, str | None] | None:
        """(reason, node id) once a stop was requested."""
        return self.service.stop_reason()

    def request_stop(self, reason: str, node_id: str | None = None) -> None:
        """Stop the program from the launcher side."""
        self.service.request_stop(reason, node_id)

    def _on_stop(self, reason: str, node_id: str | None) -> None:
        log.info(
            "topo program %s stopping: %s (from %s)",
            self.info.program_id,
            reason,
            node_id or "launcher",
        )
        self.stop_event.set()

    def set_members(
        self,
        generation: int,
        groups: dict[str, tuple[tuple[str, str, float | None], ...]],
        holders: dict[str, frozenset[str]],
    ) -> None:
        """A new membership of the program's groups (``RegistryService.set_members``),
        announced to every process for ``ANNOUNCE_S``."""
        self.service.set_members(generation, groups, holders)
        self._announce_until = time.monotonic() + ANNOUNCE_S

    def fetched(self, member: str) -> int:
        """The membership generation executable ``member`` last fetched (0: none)."""
        return self.service.fetched.get(member, 0)

    def end_members(self, members: list[str] | tuple[str, ...]) -> None:
        """Ask these executables to end their nodes as at a stop (announced until
        ``unend``); the rest of the program goes on."""
        self.service.ending.update(members)

    def unend(self, member: str) -> None:
        """``member`` ended (or is to start again): stop asking it to end."""
        self.service.ending.discard(member)

    def _publish(self, pub: zmq.Socket) -> None:
        try:
            while not self._closed.is_set():
                stopping = self.stop_event.wait(0.2)
                if self._closed.is_set():
                    break
                if stopping:
                    reason, node = self.service.stop_reason() or ("", None)
                    pub.send_multipart([STOP_TOPIC, reason.encode(), (node or "").encode()])
                    self._closed.wait(0.1)
                    continue
                if time.monotonic() < self._announce_until:
                    pub.send_multipart([MEMBERS_TOPIC, str(self.service.generation).encode()])
                for member in list(self.service.ending):
                    pub.send_multipart([END_TOPIC, member.encode()])
        finally:
            pub.close(linger=0)

    def close(self) -> None:
        """Stop serving the registry."""
        self._closed.set()
        self._server.close()
        self._publisher.join(5)
        if self._own_dir is not None:
            shutil.rmtree(self._own_dir, ignore_errors=True)

    def waited_for(self, within_s: float = 2.0) -> set[str]:
        """Nodes some caller looked up in the last ``within_s`` seconds and did not find
        (their addresses are awaited: what a starting node may be waiting for)."""
        since = time.monotonic() - within_s
        return {n for n, at in list(self.service.missed.items()) if at >= since}

    def forget(self, node_ids: list[str] | tuple[str, ...]) -> None:
        """Drop the addresses of nodes whose process ended, at once: callers stop
        reconnecting to them and wait for the restarted node's new address."""
        self.service.forget(node_ids)
