"""Security: authentication before unpickling, hostile input, loopback-only binding."""

from __future__ import annotations

import os
import pickle
import socket
from pathlib import Path
from typing import Any

import numpy as np
import psutil
import pytest
import zmq
from rt_support import Spawn
from zmq.utils.monitor import recv_monitor_message

from topo.runtime import Handle, ProgramContext, wire
from topo.runtime.errors import MessageTooLarge
from topo.testing import wait_until


class _Trace:
    """Unpickling this creates a file: proof that bytes were unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def _head(kind: int, call_id: int, method: bytes = b"echo", flags: int = 0) -> bytes:
    """A request header followed by the method name, as the wire module lays it out."""
    return wire.HEADER.pack(wire.MAGIC, kind, flags, call_id, 5.0, len(method)) + method


def _evil_request(path: Path) -> list[bytes]:
    payload = pickle.dumps(((_Trace(str(path)),), {}), protocol=5)
    return [_head(wire.K_CALL, 1) + payload]


def _dealer(endpoint: str, *, watch: bool = False, **opts: Any) -> zmq.Socket:
    """A DEALER connected to ``endpoint``; ``watch``: its handshake is watched from before
    its connect (``_handshake``)."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.linger = 0
    for key, value in opts.items():
        setattr(sock, key, value)
    if watch:
        sock.get_monitor_socket()
    sock.connect(endpoint)
    return sock


HANDSHAKE_ENDED = {  # what a client sees of its first handshake: refused, or let in
    zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL: "refused",
    zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL: "refused",
    zmq.EVENT_HANDSHAKE_FAILED_AUTH: "refused",
    zmq.EVENT_DISCONNECTED: "refused",
    zmq.EVENT_HANDSHAKE_SUCCEEDED: "let in",
}


def _handshake(sock: zmq.Socket) -> str | None:
    """How ``sock``'s first handshake ended, once it has (None before)."""
    monitor = sock.get_monitor_socket()
    while monitor.poll(0):
        event = recv_monitor_message(monitor)["event"]
        if event in HANDSHAKE_ENDED:
            return HANDSHAKE_ENDED[event]
    return None


def _endpoint(program: ProgramContext, node_id: str) -> str:
    h = Handle(node_id, program=program)
    h.echo(0)  # waits until it is up
    endpoint = program.address_book.lookup(node_id)
    assert endpoint is not None
    return endpoint


def test_unauthenticated_clients_are_refused_before_unpickling(
    program: ProgramContext, spawn: Spawn, tmp_path: Path
) -> None:
    spawn("echo/0")
    endpoint = _endpoint(program, "echo/0")
    trace = tmp_path / "unpickled.txt"
    key_pub, key_sec = zmq.curve_keypair()
    token = program.mint("echo/0")
    assert token is not None
    attackers = [
        _dealer(endpoint, watch=True, sndtimeo=2000),  # NULL mechanism
        _dealer(
            endpoint, watch=True, sndtimeo=2000, plain_username=b"x", plain_password=b"wrong secret"
        ),
        _dealer(
            endpoint,
            watch=True,
            sndtimeo=2000,
            plain_username=b"x",
            plain_password=token[:-1].encode(),
        ),
        # The program secret itself is no password: only the node's token is.
        _dealer(
            endpoint,
            watch=True,
            sndtimeo=2000,
            plain_username=b"x",
            plain_password=program.secret.encode(),
        ),
        _dealer(
            endpoint,
            watch=True,
            sndtimeo=2000,
            curve_serverkey=key_pub,
            curve_publickey=key_pub,
            curve_secretkey=key_sec,
        ),
    ]
    for sock in attackers:
        for _ in range(3):
            try:  # once the server has refused the handshake a send may block: time out
                sock.send_multipart(_evil_request(trace))
            except zmq.Again:
                break
    # each handshake refused: what they sent can never be taken in
    ends = [wait_until(lambda s=s: _handshake(s), 30, what="a handshake") for s in attackers]
    assert ends == ["refused"] * len(attackers)
    for sock in attackers:
        assert sock.poll(100) == 0  # no reply either
        sock.get_monitor_socket().close(linger=0)
        sock.close(linger=0)
    assert not trace.exists(), "an unauthenticated payload was unpickled"
    # Control: the same bytes from a client holding the secret *are* unpickled,
    # so the check above would have seen it.
    good = _dealer(endpoint, plain_username=b"x", plain_password=token.encode())
    good.send_multipart(_evil_request(trace))
    assert good.poll(30_000)
    good.close(linger=0)
    assert trace.exists()
    assert Handle("echo/0", program=program).echo("still fine") == "still fine"


def _garbage(rng: np.random.Generator, i: int) -> list[bytes]:
    header = _head(wire.K_CALL, i)
    kind = i % 12
    rand = lambda n: rng.bytes(int(n))  # noqa: E731
    if kind == 0:
        return [rand(rng.integers(0, 64))]
    if kind == 1:  # truncated header
        return [header[: int(rng.integers(0, wire.HEADER_SIZE))]]
    if kind == 2:  # random payload
        return [header + rand(rng.integers(0, 200))]
    if kind == 3:  # method name that is not utf-8
        return [_head(wire.K_CALL, i, b"\xff\xfe\xfa") + pickle.dumps(((1,), {}))]
    if kind == 4:  # unknown kind
        return [_head(99, i) + pickle.dumps(((1,), {}))]
    if kind == 5:  # header only: the method name's length runs past the frame
        return [header[:-2]]
    if kind == 6:  # truncated pickle
        good = pickle.dumps(((np.ones(100),), {}), protocol=5)
        return [header + good[: len(good) // 2]]
    if kind == 7:  # split flag without the payload frame
        return [_head(wire.K_CALL, i, flags=wire.F_SPLIT)]
    if kind == 9:  # a batch whose lengths run past its end
        good = wire.batch_frame([header + b"x", header + b"y"])
        return [good[: len(good) - int(rng.integers(1, 4))]]
    if kind == 10:  # a batch of garbage calls
        return [wire.batch_frame([rand(rng.integers(0, 40)) for _ in range(3)])]
    if kind == 11:  # a batch claiming more calls than a batch may hold
        return [_head(wire.K_BATCH, wire.BATCH_MAX + 1, b"")]
    return [rand(rng.integers(1, 30)) for _ in range(int(rng.integers(1, 7)))]


def test_garbage_truncated_and_oversized_messages(program: ProgramContext, spawn: Spawn) -> None:
    spawn("echo/0", max_bytes=1 << 20)
    endpoint = _endpoint(program, "echo/0")
    rng = np.random.default_rng(7)
    token = program.mint("echo/0")
    assert token is not None
    sock = _dealer(endpoint, plain_username=b"x", plain_password=token.encode(), sndhwm=0)
    for i in range(10_000):
        sock.send_multipart(_garbage(rng, i))
    # Raw stream garbage that is not even a zmq greeting.
    for _ in range(20):
        with _raw_connection(endpoint) as raw:
            raw.sendall(rng.bytes(4096))
    h = Handle("echo/0", program=program)
    assert h.echo("after garbage") == "after garbage"
    # Oversized in total (several frames, each under the limit): refused with a reason.
    parts = tuple(np.ones(80_000) for _ in range(3))
    with pytest.raises(MessageTooLarge, match="exceeds"):
        h.echo(parts)
    # One frame over the limit, sent by a client that does not check it: libzmq drops the
    # connection, and the server keeps serving.
    sock.send_multipart([_head(wire.K_CALL, 99) + b"x" * (2 << 20)])
    assert h.echo("after oversized") == "after oversized"
    sock.close(linger=0)


def _raw_connection(endpoint: str) -> socket.socket:
    if endpoint.startswith("ipc://"):
        raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        raw.settimeout(10)
        raw.connect(endpoint.removeprefix("ipc://"))
        return raw
    host, port = endpoint.removeprefix("tcp://").rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def test_local_servers_listen_on_private_unix_sockets_only(
    program: ProgramContext, spawn: Spawn
) -> None:
    proc = spawn("echo/0")
    endpoint = _endpoint(program, "echo/0")
    assert endpoint.startswith("ipc://")
    sock_dir = Path(endpoint.removeprefix("ipc://")).parent
    assert sock_dir.stat().st_mode & 0o777 == 0o700
    for pid in (proc.pid, os.getpid()):
        listening = [
            c
            for c in psutil.Process(pid).net_connections(kind="inet")
            if c.status == psutil.CONN_LISTEN
        ]
        assert not listening, f"pid {pid} listens on the network: {listening}"
    # The node's own sockets are all in the run's private directory (the test process
    # also holds other tests' programs, so only the node process is checked for this).
    unix = [c.laddr for c in psutil.Process(proc.pid).net_connections(kind="unix") if c.laddr]
    assert unix and all(Path(a).parent == sock_dir for a in unix), unix
