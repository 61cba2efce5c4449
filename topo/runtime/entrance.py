"""The client side of a stream gateway (:mod:`topo.runtime.streams`): an ``Entrance``.

An entrance listens on an abstract Unix socket (nothing on disk to leave behind when its
process is killed) and admits only processes of its own user: the kernel tells the
connecting process's uid, anyone else is disconnected at once. Each
connection a local client (a gRPC channel) opens there becomes one ZeroMQ connection
to the gateway, authenticated (with the right to call the service's node) and
encrypted, and its bytes are relayed both ways. A connection whose gateway is gone
(its host lost, its process restarted) is closed within ``IDLE_S`` (a ping answered
by an unknown-connection close: at once), and the client's next connection reaches the
gateway again.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable

import zmq

from topo.runtime.auth import zmq_context
from topo.runtime.streams import (
    CLOSE,
    DATA,
    EVENTS,
    IDLE_S,
    NOBLOCK,
    OPEN,
    PING,
    PING_S,
    POLLIN,
    Outbox,
    Reader,
)

CLOSE_LINGER_MS = 200  # a closing connection's last message may take this long to leave
log = logging.getLogger("topo.runtime.entrance")


class _Tunnel:
    """One local connection and its ZeroMQ connection to the gateway."""

    __slots__ = ("dealer", "heard", "held", "local", "out")

    def __init__(self, local: socket.socket, dealer: zmq.Socket) -> None:
        self.local = local
        self.dealer = dealer
        self.out = Outbox(local)
        self.held: bytes | None = None  # a message the gateway's connection did not take
        self.heard = time.monotonic()


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return int(struct.unpack("3i", creds)[1])


class Entrance:
    """A local abstract Unix socket (``sockaddr``) whose connections, from processes of
    this user, are relayed to ``gateway``; ``secure`` gives each connection to the
    gateway its credentials before it connects."""

    def __init__(self, secure: Callable[[zmq.Socket], None], gateway: str) -> None:
        self._secure = secure
        self._reader = Reader()
        self.gateway = gateway  # new connections go here (see retarget)
        self.name = f"topo-{os.getpid()}-{secrets.token_hex(8)}"
        self.sockaddr = "\0" + self.name  # the abstract namespace: no file
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.sockaddr)
        self._listener.listen(64)
        self._listener.setblocking(False)
        self._listen_fd = self._listener.fileno()
        self._tunnels: dict[int, _Tunnel] = {}  # by the local socket's fd
        self._of_dealer: dict[zmq.Socket, _Tunnel] = {}
        self._poller = zmq.Poller()
        self._poller.register(self._listener, zmq.POLLIN)
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="topo-entrance", daemon=True)
        self._thread.start()

    @property
    def address(self) -> str:
        """The gRPC target of this entrance (``unix-abstract:NAME``)."""
        return f"unix-abstract:{self.name}"

    def retarget(self, gateway: str) -> None:
        """Send connections opened from now on to ``gateway`` (the service moved)."""
        self.gateway = gateway

    @property
    def connections(self) -> int:
        """How many local connections are relayed now."""
        return len(self._tunnels)

    def close(self) -> None:
        """Stop: every connection and the socket close."""
        self._closed.set()
        self._thread.join(5.0)

    # -- the loop -----------------------------------------------------------------------
    def _loop(self) -> None:
        next_ping = time.monotonic() + PING_S
        try:
            while not self._closed.is_set():
                for item, events in self._poller.poll(int(PING_S * 500)):
                    if item == self._listen_fd:
                        self._accept()
                        continue
                    if isinstance(item, zmq.Socket):
                        tunnel = self._of_dealer.get(item)
                    else:
                        tunnel = self._tunnels.get(item if isinstance(item, int) else item.fileno())
                    if tunnel is None:
                        continue
                    try:
                        if isinstance(item, zmq.Socket):
                            self._from_gateway(tunnel, events)
                        else:
                            self._from_client(tunnel, events)
                    except Exception:  # a bug must not end every tunnel: this one ends
                        log.exception("topo: an entrance failed on a connection")
                        self._drop(tunnel)
                if time.monotonic() >= next_ping:
                    self._ping()
                    next_ping = time.monotonic() + PING_S
        finally:
            for tunnel in list(self._tunnels.values()):
                self._drop(tunnel, tell=False)
            self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                local, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            if _peer_uid(local) not in (os.geteuid(), 0):
                local.close()  # another user: not a byte goes anywhere
                continue
            local.setblocking(False)
            dealer = zmq_context().socket(zmq.DEALER)
            dealer.linger = 0
            self._secure(dealer)
            dealer.connect(self.gateway)
            dealer.send(OPEN)  # queued until the handshake is done
            tunnel = self._tunnels[local.fileno()] = _Tunnel(local, dealer)
            self._of_dealer[dealer] = tunnel
            self._poller.register(local, zmq.POLLIN)
            self._poller.register(dealer, zmq.POLLIN)

    def _update(self, tunnel: _Tunnel) -> None:
        """Poll what the tunnel can take: the client while the gateway's connection takes
        its bytes, the gateway while the client reads."""
        local = 0 if tunnel.held is not None else zmq.POLLIN
        self._poller.register(tunnel.local, local | (zmq.POLLOUT if tunnel.out.pending else 0))
        remote = 0 if tunnel.out.pending else zmq.POLLIN
        remote |= zmq.POLLOUT if tunnel.held is not None else 0
        if remote:
            self._poller.register(tunnel.dealer, remote)
        else:
            try:
                self._poller.unregister(tunnel.dealer)
            except KeyError:
                pass

    def _from_client(self, tunnel: _Tunnel, events: int) -> None:
        if events & zmq.POLLOUT:
            try:
                if tunnel.out.flush():  # the client reads again: so does the tunnel
                    self._update(tunnel)
            except OSError:
                self._drop(tunnel)
                return
        if not events & (zmq.POLLIN | zmq.POLLERR) or tunnel.held is not None:
            return
        try:
            msg = self._reader.read(tunnel.local)
        except BlockingIOError:
            return
        except OSError:
            msg = DATA
        if len(msg) == 1:  # the client ended the connection
            self._drop(tunnel)
            return
        self._forward(tunnel, msg)

    def _forward(self, tunnel: _Tunnel, msg: bytes) -> None:
        was_held = tunnel.held is not None
        try:
            tunnel.dealer.send(msg, zmq.NOBLOCK)
            tunnel.held = None
        except zmq.Again:  # the gateway's connection is full: stop reading the client
            tunnel.held = msg
        if was_held or tunnel.held is not None:
            self._update(tunnel)

    def _from_gateway(self, tunnel: _Tunnel, events: int) -> None:
        if events & zmq.POLLOUT and tunnel.held is not None:
            self._forward(tunnel, tunnel.held)
        if not events & zmq.POLLIN:
            return
        for _ in range(256):
            if tunnel.out.pending:  # the client does not read: leave the rest in ZeroMQ
                self._update(tunnel)
                return
            if not int(tunnel.dealer.getsockopt(EVENTS)) & POLLIN:
                return
            try:
                msg = tunnel.dealer.recv(NOBLOCK)
            except zmq.Again:
                return
            tunnel.heard = time.monotonic()
            tag = msg[:1]
            if tag == DATA:
                try:
                    tunnel.out.write(memoryview(msg)[1:])
                except OSError:
                    self._drop(tunnel)
                    return
            elif tag == CLOSE:
                self._drop(tunnel, tell=False)
                return
        if tunnel.out.pending:
            self._update(tunnel)

    def _ping(self) -> None:
        quiet = time.monotonic() - IDLE_S
        for tunnel in list(self._tunnels.values()):
            if tunnel.out.pending:  # not read on purpose: its client is slow, not gone
                tunnel.heard = time.monotonic()
            elif tunnel.heard < quiet:
                self._drop(tunnel, tell=False)
                continue
            try:
                tunnel.dealer.send(PING, zmq.NOBLOCK)
            except zmq.Again:
                pass

    def _drop(self, tunnel: _Tunnel, tell: bool = True) -> None:
        if self._tunnels.pop(tunnel.local.fileno(), None) is None:
            return
        self._of_dealer.pop(tunnel.dealer, None)
        for sock in (tunnel.local, tunnel.dealer):
            try:
                self._poller.unregister(sock)
            except KeyError:
                pass
        tunnel.local.close()
        if tell:
            try:
                tunnel.dealer.linger = CLOSE_LINGER_MS
                tunnel.dealer.send(CLOSE, zmq.NOBLOCK)
            except zmq.ZMQError:
                pass
        tunnel.dealer.close()


_shared: dict[str, Entrance] = {}
_shared_pid = -1
_shared_lock = threading.Lock()


def shared_entrance(secure: Callable[[zmq.Socket], None], key: str, gateway: str) -> Entrance:
    """This process's entrance for ``key`` (one service of one program), made on first
    use and pointed at ``gateway``: its address stays the same when the service moves."""
    global _shared_pid
    with _shared_lock:
        if _shared_pid != os.getpid():  # a forked child: the parent's threads are gone
            _shared.clear()
            _shared_pid = os.getpid()
        entrance = _shared.get(key)
        if entrance is None:
            entrance = _shared[key] = Entrance(secure, gateway)
        elif entrance.gateway != gateway:
            entrance.retarget(gateway)
        return entrance
