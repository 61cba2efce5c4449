"""Byte streams through a gateway: an entrance's connections reach the service behind the
gateway intact, only with the right to call the service's node, and end when either
side ends."""

from __future__ import annotations

import hashlib
import os
import select
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator

import pytest
import zmq

from topo.runtime.auth import ServerAuth, new_secret, refused_count, secure_client, zmq_context
from topo.runtime.entrance import Entrance
from topo.runtime.rights import client_keypair, node_acceptor
from topo.runtime.streams import Gateway, listening_socket
from topo.testing import wait_until

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


class EchoService:
    """A Unix-socket service echoing every byte back; counts its connections."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.accepted = 0
        self.ended = 0
        self._sock = socket.socket(socket.AF_UNIX)
        self._sock.bind(path)
        self._sock.listen(16)
        threading.Thread(target=self._serve, daemon=True).start()

    def dial(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(self.path)
        return sock

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._echo, args=(conn,), daemon=True).start()

    def _echo(self, conn: socket.socket) -> None:
        with conn:
            while data := conn.recv(1 << 16):
                conn.sendall(data)
        self.ended += 1

    def close(self) -> None:
        self._sock.close()


class Keys:
    """A node's CURVE server keys and the token that grants calling it, as a reverb
    node's gateway and its callers hold them."""

    def __init__(self, token: str, secret: bytes | None = None) -> None:
        self.token = token
        self.secret = secret if secret is not None else zmq.curve_keypair()[1]
        self.public = zmq.curve_public(self.secret)

    def gateway(
        self, dial: Callable[[], socket.socket], listener: socket.socket | None = None
    ) -> Gateway:
        accept = node_acceptor(self.token)
        auth = ServerAuth("prog-streams/node", accept, self.secret.decode(), "test gateway")
        return Gateway("curve", auth, dial, listener=listener)

    def secure(self, sock: zmq.Socket) -> None:
        keypair = client_keypair(self.token)
        secure_client(sock, "curve", "tester", b"", keypair, self.public.decode())


@pytest.fixture
def security() -> Keys:
    return Keys(new_secret())


@pytest.fixture
def echo(tmp_path: os.PathLike[str]) -> Iterator[EchoService]:
    service = EchoService(os.path.join(str(tmp_path), "echo.sock"))
    yield service
    service.close()


FLOOD = 32 << 20  # bytes a client that does not read sends: more than socket buffers hold


def _connect(path: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX)
    sock.settimeout(20)
    sock.connect(path)
    return sock


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    got = bytearray()
    while len(got) < n:
        chunk = sock.recv(min(1 << 20, n - len(got)))
        if not chunk:
            raise ConnectionError(f"ended after {len(got)} of {n} bytes")
        got += chunk
    return bytes(got)


def test_connections_carry_bytes_both_ways_intact(security: Keys, echo: EchoService) -> None:
    gateway = security.gateway(echo.dial)
    entrance = Entrance(security.secure, f"tcp://127.0.0.1:{gateway.port}")
    try:
        assert entrance.address == f"unix-abstract:{entrance.name}"
        blobs = [os.urandom(3 << 20), os.urandom(1), os.urandom(70_000)]
        results: dict[int, bytes] = {}

        def roundtrip(i: int) -> None:
            with _connect(entrance.sockaddr) as sock:
                sender = threading.Thread(target=sock.sendall, args=(blobs[i],))
                sender.start()
                results[i] = _recv_exactly(sock, len(blobs[i]))
                sender.join()

        threads = [threading.Thread(target=roundtrip, args=(i,)) for i in range(len(blobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        for i, blob in enumerate(blobs):
            assert hashlib.sha256(results[i]).digest() == hashlib.sha256(blob).digest()
        assert echo.accepted == 3
        # A client that ends its connection ends the service's too, and the gateway's.
        wait_until(
            lambda: echo.ended == 3 and gateway.connections == 0,
            15,
            what="the three connections to end",
        )
        assert entrance.connections == 0
    finally:
        entrance.close()
        gateway.close()
    with pytest.raises(ConnectionRefusedError):  # closed: nothing listens there any more
        _connect(entrance.sockaddr)


def test_a_service_that_ends_a_connection_ends_the_clients(
    security: Keys, tmp_path: os.PathLike[str]
) -> None:
    path = os.path.join(str(tmp_path), "once.sock")
    service = socket.socket(socket.AF_UNIX)
    service.bind(path)
    service.listen(1)

    def dial() -> socket.socket:
        sock = socket.socket(socket.AF_UNIX)
        sock.connect(path)
        return sock

    gateway = security.gateway(dial)
    entrance = Entrance(security.secure, f"tcp://127.0.0.1:{gateway.port}")
    try:
        with _connect(entrance.sockaddr) as client:
            client.sendall(b"hello")
            conn, _ = service.accept()
            assert _recv_exactly(conn, 5) == b"hello"
            conn.sendall(b"bye")
            conn.close()
            assert _recv_exactly(client, 3) == b"bye"
            assert client.recv(10) == b""  # ended, as the service's connection did
    finally:
        entrance.close()
        gateway.close()
        service.close()


def test_a_peer_without_the_key_gets_nothing_to_the_service(
    security: Keys, echo: EchoService
) -> None:
    gateway = security.gateway(echo.dial)
    stranger = Keys(new_secret(), security.secret)  # holds another token
    intruder = Entrance(stranger.secure, f"tcp://127.0.0.1:{gateway.port}")
    raw = zmq_context().socket(zmq.DEALER)  # knows the server's key, not the token
    raw.linger = 0
    raw.curve_serverkey = security.public
    raw.curve_publickey, raw.curve_secretkey = zmq.curve_keypair()
    refused = refused_count()
    try:
        with _connect(intruder.sockaddr) as sock:
            sock.sendall(b"O")
            raw.connect(f"tcp://127.0.0.1:{gateway.port}")
            # The handshake starts at the connect; a send has no pipe to go to once the
            # refused connection is dropped (it blocked for 5 min on a loaded machine).
            raw.sndtimeo = 1000
            for message in (b"O", b"Dforged"):
                try:
                    raw.send(message)
                except zmq.Again:
                    pass
            # both handshakes refused: nothing of theirs can reach the service after that
            wait_until(lambda: refused_count() >= refused + 2, 30, what="two refusals")
            assert echo.accepted == 0 and gateway.connections == 0
    finally:
        raw.close()
        intruder.close()
        gateway.close()


def test_after_the_gateway_restarts_on_its_port_the_entrance_reaches_it_again(
    security: Keys, echo: EchoService
) -> None:
    listener = listening_socket("127.0.0.1")
    port = listener.getsockname()[1]
    gateway = security.gateway(echo.dial, listener=listener)
    entrance = Entrance(security.secure, f"tcp://127.0.0.1:{port}")
    try:
        old = _connect(entrance.sockaddr)
        old.sendall(b"one")
        assert _recv_exactly(old, 3) == b"one"
        gateway.close()

        def on_port() -> socket.socket | None:  # ZeroMQ closes the old socket in the background
            sock = listening_socket("127.0.0.1", port)
            if sock.getsockname()[1] == port:
                return sock
            sock.close()
            return None

        again = wait_until(on_port, 10, what="the gateway's port to be freed")
        gateway = security.gateway(echo.dial, listener=again)
        # The connection of the gone gateway ends (the new one does not know it) ...
        old.settimeout(30)
        assert old.recv(10) == b""
        old.close()
        # ... and a new connection through the same entrance works.
        with _connect(entrance.sockaddr) as new:
            new.sendall(b"two")
            assert _recv_exactly(new, 3) == b"two"
    finally:
        entrance.close()
        gateway.close()


def test_a_client_that_does_not_read_holds_up_no_other(security: Keys, echo: EchoService) -> None:
    gateway = security.gateway(echo.dial)
    entrance = Entrance(security.secure, f"tcp://127.0.0.1:{gateway.port}")
    try:
        stuck = _connect(entrance.sockaddr)
        stuck.setblocking(False)
        sent = 0
        # more than every kernel buffer on the way holds (the relays queue the rest), or
        # until they are all full: no room comes within 0.2 s
        while sent < FLOOD and select.select([], [stuck], [], 0.2)[1]:
            try:
                sent += stuck.send(b"x" * 65536)
            except BlockingIOError:
                pass
        assert sent > 0
        with _connect(entrance.sockaddr) as other:
            for _ in range(20):
                other.sendall(b"ping")
                assert _recv_exactly(other, 4) == b"ping"
        stuck.setblocking(True)
        stuck.settimeout(30)
        assert len(_recv_exactly(stuck, sent)) == sent  # nothing was lost meanwhile
        stuck.close()
    finally:
        entrance.close()
        gateway.close()


def test_a_dealer_with_the_key_is_served(security: Keys, echo: EchoService) -> None:
    """The wire protocol, as a peer of another language would speak it."""
    gateway = security.gateway(echo.dial)
    dealer = zmq_context().socket(zmq.DEALER)
    dealer.linger = 0
    security.secure(dealer)
    try:
        dealer.connect(f"tcp://127.0.0.1:{gateway.port}")
        dealer.send(b"O")
        dealer.send(b"Dabc")
        assert dealer.poll(10_000)
        assert dealer.recv() == b"Dabc"
        dealer.send(b"P")
        assert dealer.poll(10_000) and dealer.recv() == b"P"
        dealer.send(b"C")
        wait_until(lambda: echo.ended == 1, 15, what="the connection to end")
    finally:
        dealer.close()
        gateway.close()


def test_a_taken_port_gives_the_gateway_another() -> None:
    squatter = socket.create_server(("127.0.0.1", 0))
    port = squatter.getsockname()[1]
    with squatter:
        listener = listening_socket("127.0.0.1", port)
        with listener:
            assert listener.getsockname()[1] not in (0, port)


def test_another_user_is_disconnected_before_a_byte_moves(
    security: Keys, echo: EchoService
) -> None:
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("needs root (to become another user) and setpriv")
    gateway = security.gateway(echo.dial)
    entrance = Entrance(security.secure, f"tcp://127.0.0.1:{gateway.port}")
    other = (
        "import socket; s = socket.socket(socket.AF_UNIX); s.settimeout(10); "
        f"s.connect({entrance.sockaddr!r}); s.sendall(b'x' * 100); print(repr(s.recv(10)))"
    )
    try:
        done = subprocess.run(
            [*NOBODY, sys.executable, "-I", "-c", other],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if "Permission denied" in done.stderr and "python" in done.stderr.lower():
            pytest.skip("uid 65534 cannot run this Python")
        ended = ("BrokenPipeError", "ConnectionResetError")
        assert done.stdout.strip() == "b''" or any(e in done.stderr for e in ended), done
        # a connection of this user through the same entrance, after the other user's: had
        # the entrance let the other one through, the service would have accepted two
        with _connect(entrance.sockaddr) as mine:
            mine.sendall(b"me")
            assert _recv_exactly(mine, 2) == b"me"
        assert echo.accepted == 1
    finally:
        entrance.close()
        gateway.close()
