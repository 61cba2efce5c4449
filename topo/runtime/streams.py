"""Byte streams through the program's authenticated channel: the gateway side.

A service with no authentication of its own (Reverb's gRPC server) listens where no
other host can reach it. Peers on other hosts reach it through a ``Gateway`` on its
host: a ZeroMQ ROUTER socket that admits only callers holding the right to call the
service's node (the node's own handshake, :mod:`topo.runtime.rights`: CURVE with the
node's keys across hosts, so traffic is encrypted and a refused peer never gets a byte
to the service). Each connection a
peer's :class:`~topo.runtime.entrance.Entrance` accepts becomes one ZeroMQ
connection to the gateway, which opens one connection to the service and relays the
bytes both ways. Messages are bytes with a one-byte tag; nothing is unpickled.

Flow control: a peer's entrance stops reading from its ZeroMQ connection while its
local client does not read, so TCP holds the sender back; the gateway's shared socket
cannot, and buffers what the service sends until the peer takes it (bounded by the
service's own flow control: HTTP/2 windows for gRPC).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections import deque
from collections.abc import Callable

import zmq

from topo.runtime.auth import Mechanism, ServerAuth, secure_server, zmq_context

OPEN, DATA, CLOSE, PING = b"O", b"D", b"C", b"P"
CHUNK = 256 << 10  # at most this much read from a socket at once
PING_S = 1.0  # an entrance pings each of its connections this often
IDLE_S = 10.0  # a connection that heard nothing from its other end this long is closed
log = logging.getLogger("topo.runtime.streams")
# Plain ints: pyzmq's enum flags cost microseconds per use, and a relay uses them for
# every message; ``EVENTS`` is asked before a receive, which is cheaper than the
# ``zmq.Again`` a receive on an empty socket raises.
POLLIN, EVENTS, NOBLOCK = int(zmq.POLLIN), int(zmq.EVENTS), int(zmq.NOBLOCK)
SNDMORE = int(zmq.SNDMORE)


class Outbox:
    """What is still to be written to a non-blocking stream socket, in order."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._pending: deque[memoryview] = deque()

    @property
    def pending(self) -> bool:
        """True while bytes wait for the socket to take them."""
        return bool(self._pending)

    def write(self, data: bytes | memoryview) -> None:
        """Send ``data`` now as far as the socket takes it; keep the rest. Raises OSError
        when the connection is gone."""
        view = memoryview(data)
        if not self._pending:
            try:
                sent = self.sock.send(view)
            except BlockingIOError:
                sent = 0
            if sent == len(view):
                return
            view = view[sent:]
        self._pending.append(view)

    def flush(self) -> bool:
        """Send what waits; True when nothing is left (OSError: the connection is gone)."""
        while self._pending:
            head = self._pending[0]
            try:
                sent = self.sock.send(head)
            except BlockingIOError:
                return False
            if sent < len(head):
                self._pending[0] = head[sent:]
                return False
            self._pending.popleft()
        return True


class Reader:
    """Reads a stream socket into one reused buffer, the ``DATA`` tag in front: a message
    ready to relay costs one copy (``recv(CHUNK)`` would allocate and shrink a
    ``CHUNK``-sized object for every read, however few bytes came)."""

    def __init__(self) -> None:
        self._buf = bytearray(CHUNK + 1)
        self._buf[0] = DATA[0]
        self._into = memoryview(self._buf)[1:]

    def read(self, sock: socket.socket) -> bytes:
        """``DATA`` and what ``sock`` has (at most ``CHUNK``); just ``DATA`` at its end.
        Raises ``BlockingIOError`` when nothing waits, ``OSError`` when it broke."""
        n = sock.recv_into(self._into)
        return bytes(self._buf[: n + 1])


def listening_socket(host: str, port: int = 0) -> socket.socket:
    """A TCP socket listening on ``host:port`` (``port`` 0, or taken: one the OS picks),
    to hand to a :class:`Gateway` made later (in another network namespace, say)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        if not port:
            sock.close()
            raise
        sock.bind((host, 0))
    sock.listen(128)
    return sock


def tcp_endpoint(host: str, port: int) -> str:
    """``tcp://host:port`` (an IPv6 address in brackets)."""
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


class _Link:
    """One peer connection relayed to the service."""

    __slots__ = ("heard", "local", "out")

    def __init__(self, local: socket.socket) -> None:
        local.setblocking(False)
        self.local = local
        self.out = Outbox(local)
        self.heard = time.monotonic()


class Gateway:
    """Admits the peers ``auth`` accepts (with ``mechanism``) on a TCP port and relays
    each of their connections to the local service that ``dial()`` connects to (a new
    socket per connection).

    ``listener``, a socket from :func:`listening_socket`, is taken over (its port is the
    gateway's); without it the gateway listens on a fresh port of ``host``."""

    def __init__(
        self,
        mechanism: Mechanism,
        auth: ServerAuth,
        dial: Callable[[], socket.socket],
        *,
        listener: socket.socket | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self._dial = dial
        self._reader = Reader()
        self._links: dict[bytes, _Link] = {}
        self._by_fd: dict[int, bytes] = {}
        self._closed = threading.Event()
        self.last_active = time.monotonic()  # when a peer last sent or got bytes
        router = self._router = zmq_context().socket(zmq.ROUTER)
        router.linger = 0
        router.sndhwm = 0  # never drops: the service's flow control bounds what waits
        router.rcvhwm = 0
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)  # a gone peer is an error, not a drop
        secure_server(router, mechanism, auth)
        if listener is None:
            listener = listening_socket(host)
        host, port = listener.getsockname()[:2]
        router.setsockopt(zmq.USE_FD, listener.detach())
        router.bind(tcp_endpoint(host, port))
        self.port = int(port)
        self._poller = zmq.Poller()
        self._poller.register(router, zmq.POLLIN)
        self._thread = threading.Thread(target=self._loop, name="topo-gateway", daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop relaying: every connection closes, the port too."""
        self._closed.set()
        self._thread.join(5.0)

    @property
    def connections(self) -> int:
        """How many peer connections are relayed now."""
        return len(self._links)

    def _loop(self) -> None:
        next_sweep = time.monotonic() + PING_S
        try:
            while not self._closed.is_set():
                for item, events in self._poller.poll(int(PING_S * 500)):
                    try:
                        if item is self._router:
                            self._from_peers()
                        else:
                            self._from_service(item, events)
                    except Exception:  # a bug must not end every relay: this one ends
                        log.exception("topo: the stream gateway failed on a connection")
                        if item is not self._router:
                            self._drop(self._by_fd.get(self._fd(item), b""))
                if time.monotonic() >= next_sweep:
                    self._sweep()
                    next_sweep = time.monotonic() + PING_S
        finally:
            for rid in list(self._links):
                self._drop(rid, tell=False)
            self._router.close()

    def _send(self, rid: bytes, msg: bytes) -> bool:
        try:
            self._router.send(rid, NOBLOCK | SNDMORE)
            self._router.send(msg, NOBLOCK)
            return True
        except zmq.ZMQError:  # the peer is gone (EHOSTUNREACH)
            return False

    def _from_peers(self) -> None:
        router, links = self._router, self._links
        for _ in range(1024):  # then the services get their turn
            if not int(router.getsockopt(EVENTS)) & POLLIN:
                return
            try:
                frames = router.recv_multipart(NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 2:  # not this protocol: end the connection
                self._drop(frames[0])
                continue
            rid, msg = frames
            tag = msg[:1]
            link = links.get(rid)
            if tag == DATA and link is not None:
                link.heard = self.last_active = time.monotonic()
                try:
                    link.out.write(memoryview(msg)[1:])
                except OSError:
                    self._drop(rid)
                    continue
                if link.out.pending:
                    self._poller.register(link.local, zmq.POLLIN | zmq.POLLOUT)
            elif tag == OPEN:
                self._open(rid)
            elif link is None:
                self._send(rid, CLOSE)  # a connection this gateway does not know
            elif tag == PING:
                link.heard = time.monotonic()
                self._send(rid, PING)
            else:  # CLOSE, or a tag from a newer peer: end it
                self._drop(rid, tell=False)

    def _open(self, rid: bytes) -> None:
        if rid in self._links:
            self._drop(rid, tell=False)
        try:
            local = self._dial()
        except OSError as exc:
            log.warning("topo: the stream gateway cannot reach its service: %s", exc)
            self._send(rid, CLOSE)
            return
        link = self._links[rid] = _Link(local)
        self._by_fd[local.fileno()] = rid
        self._poller.register(link.local, zmq.POLLIN)

    @staticmethod
    def _fd(item: socket.socket | int) -> int:
        return item if isinstance(item, int) else item.fileno()

    def _from_service(self, item: socket.socket | int, events: int) -> None:
        rid = self._by_fd.get(self._fd(item))
        link = None if rid is None else self._links.get(rid)
        if rid is None or link is None:
            return
        if events & zmq.POLLOUT:
            try:
                if link.out.flush():
                    self._poller.register(link.local, zmq.POLLIN)
            except OSError:
                self._drop(rid)
                return
        if events & (zmq.POLLIN | zmq.POLLERR):
            try:
                msg = self._reader.read(link.local)
            except BlockingIOError:
                return
            except OSError:
                msg = DATA
            if len(msg) == 1:  # the service ended the connection
                self._drop(rid)
            elif self._send(rid, msg):
                self.last_active = time.monotonic()
            else:
                self._drop(rid, tell=False)

    def _sweep(self) -> None:
        quiet = time.monotonic() - IDLE_S
        for rid in [r for r, link in self._links.items() if link.heard < quiet]:
            self._drop(rid)

    def _drop(self, rid: bytes, tell: bool = True) -> None:
        link = self._links.pop(rid, None)
        if link is None:
            return
        if tell:
            self._send(rid, CLOSE)
        self._by_fd.pop(link.local.fileno(), None)
        try:
            self._poller.unregister(link.local)
        except KeyError:
            pass
        link.local.close()
