"""Client side of topo RPC: connections, reply decoding and blocking calls.

Blocking calls use a DEALER socket owned by the calling thread (one per
peer), so a call is one send and one receive with no thread hop. They (and
the futures engine in ``futures.py``) connect lazily, resolve peers through
the program's address book, wait for a peer that is not up yet until the
deadline, and re-resolve when a peer stops answering connections (it may
have restarted on another port).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import Any

import zmq

from topo.runtime import wire
from topo.runtime.auth import secure_client, zmq_context
from topo.runtime.context import ProgramContext
from topo.runtime.errors import (
    DeadlineExceeded,
    MessageTooLarge,
    PeerUnavailable,
    ProtocolError,
    decode_exception,
)

call_ids = itertools.count(1)
endpoints: dict[tuple[str, str], str] = {}
limits: dict[tuple[str, str], int] = {}  # a peer's message limit, as it registered it
_NOBLOCK = wire.NOBLOCK
_RCVTIMEO = int(zmq.RCVTIMEO)  # a plain int: pyzmq's attribute-style options are slow


HEARTBEAT_MS = 1000  # TCP peers: a ZMTP ping this often on a quiet connection...
HEARTBEAT_TIMEOUT_MS = 4000  # ...and a connection silent this long is dropped


def new_socket(program: ProgramContext, endpoint: str) -> zmq.Socket:
    sock = zmq_context().socket(zmq.DEALER)
    sock.linger = 0
    sock.immediate = True  # no queueing towards a peer that is not connected
    sock.rcvhwm = 0
    if endpoint.startswith("tcp://"):
        # A host cut off the network sends no reset: without heartbeats the connection
        # would look alive forever and calls would queue into it.
        sock.heartbeat_ivl = HEARTBEAT_MS
        sock.heartbeat_timeout = HEARTBEAT_TIMEOUT_MS
    secure_client(sock, program.security)
    sock.connect(endpoint)
    return sock


def peer_limit(program: ProgramContext, node_id: str) -> int | None:
    """The largest request ``node_id`` accepts (from the address book, then cached), or
    None when it is not known."""
    key = (program.program_id, node_id)
    limit = limits.get(key)
    if limit is None:
        try:
            limit = program.address_book.message_limit(node_id)
        except Exception:  # the registry is unreachable: the call itself will say so
            return None
        if limit is not None:
            limits[key] = limit
    return limit


def check_size(frames: list[Any], limit: int | None, node_id: str, method: str) -> None:
    """Refuse a request larger than the peer accepts before it is sent: a server drops
    an oversized frame without a word, and the caller would wait out its deadline."""
    if limit is None:
        return
    size = len(frames[0]) if len(frames) == 1 else wire.frames_nbytes(frames)
    if size > limit:
        raise MessageTooLarge(node_id, method, size, limit)


class _Conn:
    """One DEALER socket to one peer, used by a single thread."""

    def __init__(self, program: ProgramContext, node_id: str, endpoint: str) -> None:
        self.program = program
        self.node_id = node_id
        self.endpoint: str | None = endpoint
        self.sock = new_socket(program, endpoint)
        self.limit = peer_limit(program, node_id)

    def refresh(self) -> bool:
        """Re-resolve the peer; reconnect if it moved. True when it moved.

        A peer the registry no longer lists (its process ended) is dropped at once, so
        the socket stops reconnecting to its old address while it restarts."""
        key = (self.program.program_id, self.node_id)
        endpoint = self.program.address_book.lookup(self.node_id)
        if endpoint == self.endpoint:
            return False
        if self.endpoint is not None:
            self.sock.disconnect(self.endpoint)
        self.endpoint = endpoint
        if endpoint is None:
            endpoints.pop(key, None)
            return False
        self.sock.connect(endpoint)
        endpoints[key] = endpoint
        if self.limit is None:
            self.limit = peer_limit(self.program, self.node_id)
        return True


_local = threading.local()


def _conn(program: ProgramContext, node_id: str, start: float, deadline: float) -> _Conn:
    pid = os.getpid()
    if getattr(_local, "pid", None) != pid:
        _local.pid, _local.conns = pid, {}
    key = (program.program_id, node_id)
    conn: _Conn | None = _local.conns.get(key)
    if conn is None:
        endpoint = endpoints.get(key) or program.address_book.wait_lookup(node_id, deadline)
        if endpoint is None:
            raise PeerUnavailable(node_id, time.monotonic() - start, "no address registered")
        endpoints[key] = endpoint
        conn = _local.conns[key] = _Conn(program, node_id, endpoint)
    return conn


def decode_reply(msg: wire.Message, node_id: str) -> Any:
    """Turn a parsed reply into a value, or raise the remote error."""
    if msg.kind == wire.K_OK:
        return wire.loads(msg.payload, msg.buffers)
    if msg.kind == wire.K_ERROR:
        raise decode_exception(wire.loads(msg.payload, msg.buffers))
    if msg.kind == wire.K_FAULT:
        text = bytes(msg.payload).decode(errors="replace")
        raise ProtocolError(f"node {node_id!r} rejected the call: {text}")
    raise ProtocolError(f"node {node_id!r} sent a reply of unknown kind {msg.kind}")


def call(
    program: ProgramContext,
    node_id: str,
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    timeout: float,
) -> Any:
    """Blocking call of ``node_id.method(*args, **kwargs)`` with a deadline."""
    start = time.monotonic()
    deadline = start + timeout
    conn = _conn(program, node_id, start, deadline)
    call_id = next(call_ids)
    frames = wire.request_frames(call_id, method, timeout, args, kwargs)
    check_size(frames, conn.limit, node_id, method)
    sock = conn.sock
    step = 0.02
    while True:
        try:
            wire.send(sock, frames, _NOBLOCK)
            break
        except zmq.Again:
            pass
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            detail = (
                f"no connection to {conn.endpoint}"
                if conn.endpoint
                else "no address registered (its process ended)"
            )
            raise PeerUnavailable(node_id, time.monotonic() - start, detail)
        if not sock.poll(int(min(step, remaining) * 1000) + 1, zmq.POLLOUT):
            conn.refresh()
            step = min(step * 2, 0.5)
    while True:
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise zmq.Again
            # A blocking receive with a timeout: no poller to build for every call.
            sock.setsockopt(_RCVTIMEO, int(remaining * 1000) + 1)
            frames = sock.recv_multipart(copy=False)
        except zmq.Again:
            try:  # the peer may have moved (restarted elsewhere): the next call goes there
                conn.refresh()
            except Exception:
                pass
            raise DeadlineExceeded(node_id, method, time.monotonic() - start) from None
        for msg in wire.parse_replies(frames):
            if msg.call_id == call_id:  # else a late reply to an earlier call that timed out
                return decode_reply(msg, node_id)
