"""The program registry's client: every node process's ``AddressBook``.

A ``RegistryClient`` registers and looks up addresses, reports node status and metric
rows, and hears what the registry announces on its authenticated PUB socket: the
program's stop, a new membership generation of the groups (it then refreshes the
process's whole-group handles, ``topo.runtime.membership``) and the executables asked
to end their nodes (``topo apply``). Executables sharing a process (the threads backend)
hear through one client's watcher.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import zmq

from topo.runtime import client
from topo.runtime.addressbook import AddressBook, InProcessAddressBook
from topo.runtime.auth import secure_client, zmq_context
from topo.runtime.context import ProgramContext
from topo.runtime.errors import DeadlineExceeded
from topo.runtime.membership import Views, members_from_wire
from topo.runtime.registry import (
    END_TOPIC,
    MEMBERS_TOPIC,
    METRICS_TIMEOUT_S,
    REGISTRY_MAX_MESSAGE_BYTES,
    STOP_CALL_TIMEOUT_S,
    STOP_TOPIC,
    RegistryInfo,
)
from topo.runtime.rights import REGISTRY_ID, Grant, client_keypair

log = logging.getLogger("topo.runtime.registry")
REGISTER_TRIES = 3  # a registration whose deadline passed is tried again (see register)
__all__ = ["RegistryClient", "connect_program"]


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

    def _call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        deadline = self._boot.default_deadline if timeout is None else timeout
        return client.call(self._boot, REGISTRY_ID, method, args, {}, deadline, self._key)

    def register(self, node_id: str, endpoint: str, max_message_bytes: int | None = None) -> None:
        # Registering again is harmless (the same endpoint), and a registry slow to
        # answer 200 nodes registering at once on a loaded machine must not fail one: a
        # deadline passed is tried again, up to REGISTER_TRIES, unless the program stops.
        for attempt in range(1, REGISTER_TRIES + 1):
            try:
                self._call("register", node_id, endpoint, max_message_bytes)
                return
            except DeadlineExceeded:
                if attempt == REGISTER_TRIES or self._stop.is_set():
                    raise
                log.warning("registering %s again: the registry did not answer", node_id)

    def unregister(self, node_id: str, endpoint: str) -> None:
        self._call("unregister", node_id, endpoint)

    def lookup(self, node_id: str, timeout: float | None = None) -> str | None:
        result: str | None = self._call("lookup", node_id, timeout=timeout)
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
