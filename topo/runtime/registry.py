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
import os
import shutil
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import zmq

from topo.runtime import client, transport
from topo.runtime.addressbook import AddressBook, InProcessAddressBook
from topo.runtime.auth import Mechanism, ServerAuth, secure_client, secure_server, zmq_context
from topo.runtime.context import DEFAULT_DEADLINE, NodeInfo, ProgramContext
from topo.runtime.membership import Views, members_from_wire
from topo.runtime.registry_service import (
    MAX_METRIC_ROWS,
    MetricsHandler,
    RegistryService,
    ReportHandler,
)
from topo.runtime.rights import REGISTRY_ID, Authority, Grant, client_keypair, zap_domain
from topo.runtime.server import NodeServer

log = logging.getLogger("topo.runtime.registry")
__all__ = [
    "MAX_METRIC_ROWS",
    "REGISTRY_ID",
    "MetricsHandler",
    "RegistryClient",
    "RegistryInfo",
    "RegistryServer",
    "RegistryService",
    "ReportHandler",
    "connect_program",
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


class RegistryClient(AddressBook):
    """``AddressBook`` backed by a program's ``RegistryServer``; an executable's process
    passes its ``grant`` (``info`` then has no secret). With ``stop_from``, it hears the
    program's stop through that client's watcher (executables sharing a process)."""

    def __init__(
        self,
        info: RegistryInfo,
        call_timeout: float = 30.0,
        grant: Grant | None = None,
        stop_from: RegistryClient | None = None,
    ) -> None:
        self.info = info
        book = InProcessAddressBook()
        book.register(REGISTRY_ID, info.endpoint, REGISTRY_MAX_MESSAGE_BYTES)
        self._boot = ProgramContext(
            info.program_id,
            info.secret,
            book,
            call_timeout,
            info.mechanism,
            info.bind_host,
            info.ipc_dir,
            grant,
            info.server_key,
        )
        self._key = self._boot.member_key
        self._stop_from = stop_from
        # Its own stop event, set at the program's stop (a shared client's watcher sets
        # its clients' too) or when topo apply asks its executable to end its nodes.
        self._stop = threading.Event()
        self._reason: tuple[str, str | None] | None = None
        self.views = Views()  # the process's whole-group handles (topo.runtime.membership)
        self._clients: list[RegistryClient] = []  # clients that hear through this one
        self._clients_lock = threading.Lock()
        if stop_from is not None:
            stop_from.adopt(self)
        self._closed = threading.Event()
        # close() wakes the watcher through a pipe: an inproc knock connected after the
        # watcher had ended would never be reaped (one socket lost per closed client).
        self._wake_r, self._wake_w = os.pipe() if stop_from is None else (-1, -1)
        self._watcher = threading.Thread(target=self._watch, name="topo-stop-watch", daemon=True)
        self._left = False
        if stop_from is None:
            client.joined(info.program_id)
            self._watcher.start()

    def _call(self, method: str, *args: Any) -> Any:
        return client.call(
            self._boot, REGISTRY_ID, method, args, {}, self._boot.default_deadline, self._key
        )

    def register(self, node_id: str, endpoint: str, max_message_bytes: int | None = None) -> None:
        self._call("register", node_id, endpoint, max_message_bytes)

    def unregister(self, node_id: str, endpoint: str) -> None:
        self._call("unregister", node_id, endpoint)

    def lookup(self, node_id: str) -> str | None:
        result: str | None = self._call("lookup", node_id)
        return result

    def message_limit(self, node_id: str) -> int | None:
        result: int | None = self._call("message_limit", node_id)
        return result

    def server_key(self, node_id: str) -> str | None:
        result: str | None = self._call("server_key", node_id)
        return result

    def saved_state(self, node_id: str) -> bytes | None:
        result: bytes | None = self._call("saved_state", node_id)
        return result

    def request_stop(self, reason: str, node_id: str | None = None) -> None:
        # The registry first: once this process sees its own stop it may close and exit,
        # and a request still unsent would be lost with it. Marked locally in any case.
        try:
            client.call(
                self._boot,
                REGISTRY_ID,
                "request_stop",
                (reason, node_id),
                {},
                min(self._boot.default_deadline, STOP_CALL_TIMEOUT_S),
                self._key,
            )
        finally:
            self._mark_stopped(reason, node_id)

    def report(
        self, kind: str, node: str, exe: str, attempt: int, pid: int, traceback: str = ""
    ) -> None:
        """Tell the launcher a node is ``ready``, ``finished`` or ``failed`` (blocks until
        the registry has it, so it arrives before the process's exit)."""
        client.call(
            self._boot,
            REGISTRY_ID,
            "report",
            (kind, node, exe, attempt, pid, traceback),
            {},
            self._boot.default_deadline,
            self._key,
        )

    def metrics(self, rows: list[dict[str, Any]]) -> None:
        """Send metric rows to the launcher's store (blocks until the registry has them;
        ``topo.metrics`` loggers call this from their background sender)."""
        timeout = min(self._boot.default_deadline, METRICS_TIMEOUT_S)
        client.call(self._boot, REGISTRY_ID, "metrics", (rows,), {}, timeout, self._key)

    @property
    def stop_event(self) -> threading.Event:
        return self._stop

    @property
    def member(self) -> str:
        """The executable (or the launcher) this client calls the registry as."""
        return self._boot.member

    def stop_reason(self) -> tuple[str, str | None] | None:
        if self._reason is not None or self._stop_from is None:
            return self._reason
        return self._stop_from.stop_reason()

    def adopt(self, other: RegistryClient) -> None:
        """``other`` (an executable sharing this process) hears the program's stop, the
        end of its nodes and membership changes through this client's watcher."""
        with self._clients_lock:
            self._clients.append(other)
        if self._stop.is_set():
            other._stop.set()

    def _mark_stopped(self, reason: str, node_id: str | None) -> None:
        if self._stop_from is not None:
            return self._stop_from._mark_stopped(reason, node_id)
        if self._reason is None:
            self._reason = (reason, node_id)
        self._stop.set()
        with self._clients_lock:
            for other in self._clients:
                other._stop.set()

    def _end(self, reason: str) -> None:
        """This executable's nodes are to end as at a stop; the program goes on."""
        if self._reason is None:
            self._reason = (reason, None)
        self._stop.set()

    def _heard_end(self, member: str) -> None:
        if member == self.member:
            self._end("ended by topo apply")
        with self._clients_lock:
            clients = list(self._clients)
        for other in clients:
            if other.member == member and not other._stop.is_set():
                other._end("ended by topo apply")

    def refresh_members(self) -> None:
        """Ask the registry for the current members of the groups this process's views
        follow (and those of the clients that hear through this one), and update them."""
        with self._clients_lock:
            clients = [self, *self._clients]
        for each in clients:
            if not each.views.groups() or each._stop.is_set():
                continue
            try:
                generation, groups = members_from_wire(each._call("members"))
            except Exception as exc:  # the next announcement tries again
                log.warning("topo: could not fetch the groups' members: %r", exc)
                continue
            each.views.update(generation, groups)

    def _watch(self) -> None:
        sub = zmq_context().socket(zmq.SUB)
        sub.linger = 0
        boot = self._boot
        if boot.mechanism == "curve":
            keypair = client_keypair(self._key)
            secure_client(sub, "curve", boot.member, b"", keypair, boot.registry_key)
        else:
            secure_client(sub, "plain", boot.member, self._key.encode())
        sub.subscribe(STOP_TOPIC)
        sub.connect(self.info.pub_endpoint)
        try:
            sub.subscribe(MEMBERS_TOPIC)
            sub.subscribe(END_TOPIC)
            try:  # a stop, an end or a membership change announced before we subscribed
                info = self._call("stop_reason")
                if info is not None:
                    self._mark_stopped(info[0], info[1])
                if self._call("ends"):
                    self._end("ended by topo apply")
                self._membership(int(self._call("membership")))
            except Exception as exc:
                log.warning("topo: cannot reach registry %s: %r", self.info.endpoint, exc)
            poller = zmq.Poller()
            poller.register(sub, zmq.POLLIN)
            poller.register(self._wake_r, zmq.POLLIN)
            # No timeout: an idle node costs no CPU; close() writes to the pipe to end it.
            while not self._closed.is_set() and not self._stop.is_set():
                events = dict(poller.poll())
                if sub in events:
                    msg = sub.recv_multipart()
                    if len(msg) == 3 and msg[0] == STOP_TOPIC:
                        self._mark_stopped(
                            msg[1].decode(errors="replace"), msg[2].decode(errors="replace") or None
                        )
                    elif len(msg) == 2 and msg[0] == MEMBERS_TOPIC and msg[1].isdigit():
                        self._membership(int(msg[1]))
                    elif len(msg) == 2 and msg[0] == END_TOPIC:
                        self._heard_end(msg[1].decode(errors="replace"))
        finally:
            sub.close(linger=0)

    def _membership(self, generation: int) -> None:
        """The registry is at membership ``generation``: catch up if behind."""
        with self._clients_lock:
            clients = [self, *self._clients]
        if any(c.views.groups() and c.views.generation < generation for c in clients):
            self.refresh_members()

    def close(self) -> None:
        self._closed.set()
        if self._stop_from is not None:
            self._stop_from.disown(self)
            return  # no watcher of its own
        if self._wake_w >= 0:
            try:
                os.write(self._wake_w, b"x")
            except OSError:
                pass
            self._watcher.join(5)
            if self._watcher.is_alive():
                log.warning("topo: the registry stop watcher did not end within 5 s")
            else:
                os.close(self._wake_r)
                os.close(self._wake_w)
                self._wake_r = self._wake_w = -1
        if not self._left:
            self._left = True
            client.left(self.info.program_id)

    def disown(self, other: RegistryClient) -> None:
        """``other`` closed: it no longer hears through this client."""
        with self._clients_lock:
            if other in self._clients:
                self._clients.remove(other)


def connect_program(
    info: RegistryInfo, grant: Grant | None = None, book: AddressBook | None = None
) -> ProgramContext:
    """The ``ProgramContext`` of a process joining the program described by ``info``:
    with the secret in ``info``, or as the executable ``grant`` makes it. ``book``: an
    address book to share (default: a new ``RegistryClient``)."""
    return ProgramContext(
        info.program_id,
        info.secret,
        book if book is not None else RegistryClient(info, grant=grant),
        info.default_deadline,
        info.mechanism,
        info.bind_host,
        info.ipc_dir,
        grant,
        info.server_key,
    )
