"""Client side of topo RPC: connections, reply decoding and blocking calls.

Blocking calls use a DEALER socket owned by the calling thread (one per
peer), so a call is one send and one receive with no thread hop. They (and
the futures engine in ``futures.py``) connect lazily, resolve peers through
the program's address book, wait for a peer that is not up yet until the
deadline, and re-resolve when a peer stops answering connections (it may
have restarted on another port).

A call presents its handle's token (``rights``); a callee that refuses it says so in
the handshake, which the connection's socket monitor sees: the caller raises
``PermissionDenied`` at once and drops the connection (no retries against a refusal).
Once a handshake succeeded the monitor is closed (a connection costs no extra sockets).
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import Any

import zmq
from zmq.utils.monitor import parse_monitor_message

from topo.runtime import callstats, metrics, wire
from topo.runtime.auth import secure_client, zmq_context
from topo.runtime.context import ProgramContext, current_node_info
from topo.runtime.errors import (
    DeadlineExceeded,
    MessageTooLarge,
    PeerUnavailable,
    PermissionDenied,
    ProtocolError,
    decode_exception,
)
from topo.runtime.rights import NO_RIGHT, REGISTRY_ID, client_keypair

call_ids = itertools.count(1)
endpoints: dict[tuple[str, str], str] = {}
limits: dict[tuple[str, str], int] = {}  # a peer's message limit, as it registered it
server_keys: dict[tuple[str, str], str] = {}  # a peer's CURVE public key
_NOBLOCK = wire.NOBLOCK
# A call without a reply for this long looks at the registry every LOOK_S whether its
# peer's process is still there (two looks that find it gone fail the call).
LOOK_S = 1.0
_RCVTIMEO = int(zmq.RCVTIMEO)  # a plain int: pyzmq's attribute-style options are slow
_AUTH_FAILED = int(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
_WATCHED = int(zmq.EVENT_HANDSHAKE_FAILED_AUTH | zmq.EVENT_HANDSHAKE_SUCCEEDED)


HEARTBEAT_MS = 1000  # TCP peers: a ZMTP ping this often on a quiet connection...
HEARTBEAT_TIMEOUT_MS = 4000  # ...and a connection silent this long is dropped


def caller_name(program: ProgramContext) -> str:
    """Who is calling, for messages: the calling thread's node, else the process's member."""
    node = current_node_info()
    return node.id if node is not None else program.member


def peer_key(program: ProgramContext, node_id: str) -> str:
    """The CURVE public key ``node_id``'s server proves (cached: it outlives restarts)."""
    key = (program.program_id, node_id)
    found = server_keys.get(key)
    if found is None:
        found = server_keys[key] = program.server_key(node_id)
    return found


def present_right(sock: zmq.Socket, program: ProgramContext, node_id: str, cap: str | None) -> None:
    """Give ``sock`` (before it connects) the credentials of whoever holds ``cap``, the
    right to call ``node_id`` (None: no right, which the node refuses)."""
    if program.mechanism == "curve":
        keypair = client_keypair(cap) if cap else None
        secure_client(sock, "curve", program.member, b"", keypair, peer_key(program, node_id))
    else:
        secure_client(sock, "plain", program.member, cap.encode() if cap else NO_RIGHT)


def new_socket(
    program: ProgramContext, endpoint: str, node_id: str, cap: str | None
) -> tuple[zmq.Socket, zmq.Socket]:
    """A DEALER connected to ``endpoint`` presenting ``cap`` (the right to call
    ``node_id``; None: no right), and the monitor that sees a refusal."""
    sock = zmq_context().socket(zmq.DEALER)
    sock.linger = 0
    sock.immediate = True  # no queueing towards a peer that is not connected
    sock.rcvhwm = 0
    if endpoint.startswith("tcp://"):
        # A host cut off the network sends no reset: without heartbeats the connection
        # would look alive forever and calls would queue into it.
        sock.heartbeat_ivl = HEARTBEAT_MS
        sock.heartbeat_timeout = HEARTBEAT_TIMEOUT_MS
    try:
        present_right(sock, program, node_id, cap)
        monitor = sock.get_monitor_socket(_WATCHED)
    except BaseException:
        sock.close(linger=0)
        raise
    sock.connect(endpoint)
    return sock, monitor


def handshakes(monitor: zmq.Socket, endpoint: str | None) -> tuple[bool, bool]:
    """(refused, accepted): whether the server at ``endpoint`` refused this connection's
    credentials, or accepted them, in the monitor's events so far (read here)."""
    refused = accepted = False
    while True:
        try:
            event = parse_monitor_message(monitor.recv_multipart(_NOBLOCK))
        except zmq.Again:
            return refused, accepted
        raw = event["endpoint"]
        if (raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)) != endpoint:
            continue
        if event["event"] == _AUTH_FAILED:
            refused = refused or event["value"] == 400
        else:
            accepted = True


def close_monitor(sock: zmq.Socket, monitor: zmq.Socket) -> None:
    """Stop watching ``sock``'s handshakes."""
    try:
        sock.disable_monitor()
    except zmq.ZMQError:
        pass
    monitor.close(linger=0)


def close_socket(sock: zmq.Socket, monitor: zmq.Socket | None) -> None:
    """Close a client socket and its monitor (if it still has one)."""
    if monitor is not None:
        close_monitor(sock, monitor)
    sock.close(linger=0)


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
    """One DEALER socket to one peer, with one right, used by a single thread."""

    def __init__(self, program: ProgramContext, node_id: str, endpoint: str, cap: str | None):
        self.program = program
        self.node_id = node_id
        self.endpoint: str | None = endpoint
        self.sock, monitor = new_socket(program, endpoint, node_id, cap)
        self.monitor: zmq.Socket | None = monitor  # None once a handshake succeeded
        self.limit = peer_limit(program, node_id)

    def refused(self) -> bool:
        """Whether the peer refused our right (closes the monitor once it accepted it)."""
        if self.monitor is None:
            return False
        refused, accepted = handshakes(self.monitor, self.endpoint)
        if accepted and not refused:
            close_monitor(self.sock, self.monitor)
            self.monitor = None
        return refused

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

    def wait_writable(self, ms: int) -> bool:
        """Wait up to ``ms`` for the socket to take a message, or for a refusal."""
        if self.monitor is None:
            return bool(self.sock.poll(ms, zmq.POLLOUT))
        poller = zmq.Poller()
        poller.register(self.sock, zmq.POLLOUT)
        poller.register(self.monitor, zmq.POLLIN)
        return self.sock in dict(poller.poll(ms))


_local = threading.local()
# Programs this process has stopped taking part in (the last of its registry clients of
# the program closed). Each thread closes its own connections to them at its next call (a
# zmq socket belongs to its thread); a thread that ended has its connections collected.
_members: dict[str, int] = {}
_ended: set[str] = set()
_ended_gen = 0


def joined(program_id: str) -> None:
    """A registry client of ``program_id`` opened in this process."""
    _members[program_id] = _members.get(program_id, 0) + 1
    _ended.discard(program_id)
    metrics.program_joined(program_id)


def left(program_id: str) -> None:
    """A registry client of ``program_id`` closed: at the last, its calls' connections go."""
    global _ended_gen
    count = _members.get(program_id, 1) - 1
    if count > 0:
        _members[program_id] = count
        return
    _members.pop(program_id, None)
    _ended.add(program_id)
    callstats.program_left(program_id)
    metrics.program_left(program_id)
    for cache in (endpoints, limits, server_keys):
        for key in [k for k in list(cache) if k[0] == program_id]:
            cache.pop(key, None)
    _ended_gen += 1


def ended_generation() -> int:
    """Changes each time this process leaves a program."""
    return _ended_gen


def has_left(program_id: str) -> bool:
    """Whether this process has left ``program_id`` (its last registry client closed)."""
    return program_id in _ended


def _sweep() -> None:
    """Close this thread's connections to programs this process has left."""
    _local.gen = _ended_gen
    ended = set(_ended)
    for key in [k for k in _local.conns if k[0] in ended]:
        conn = _local.conns.pop(key)
        close_socket(conn.sock, conn.monitor)


def _conn(
    program: ProgramContext, node_id: str, cap: str | None, start: float, deadline: float
) -> _Conn:
    pid = os.getpid()
    if getattr(_local, "pid", None) != pid:
        _local.pid, _local.conns, _local.gen = pid, {}, _ended_gen
    elif _local.gen != _ended_gen:
        _sweep()
    key = (program.program_id, node_id, cap)
    conn: _Conn | None = _local.conns.get(key)
    if conn is None:
        endpoint = endpoints.get(key[:2]) or program.address_book.wait_lookup(node_id, deadline)
        if endpoint is None:
            why = "no address registered"
            if program.address_book.stop_event.is_set():
                why += ", and the program is stopping"
            raise PeerUnavailable(node_id, time.monotonic() - start, why)
        endpoints[key[:2]] = endpoint
        conn = _local.conns[key] = _Conn(program, node_id, endpoint, cap)
    return conn


def peer_moved(program: ProgramContext, node_id: str, endpoint: str | None, timeout: float) -> bool:
    """Whether the process at ``endpoint`` is gone: the registry no longer lists
    ``node_id`` there (its process ended, or it restarted elsewhere). A reply to a call
    sent there can then never come; waiting on to the deadline held callers of a
    restarted node, and at a stop they outlived the grace. A registry that does not
    answer (the program is ending) counts as gone only once the program stops."""
    book = program.address_book
    try:
        return book.lookup(node_id, timeout=timeout) != endpoint
    except Exception:
        return book.stop_event.is_set()


def _refused(conn: _Conn, cap: str | None) -> PermissionDenied:
    """Drop a connection the peer refused (no retries against a refusal); the error."""
    _local.conns.pop((conn.program.program_id, conn.node_id, cap), None)
    close_socket(conn.sock, conn.monitor)
    caller = caller_name(conn.program)
    if conn.node_id == REGISTRY_ID:
        return PermissionDenied(
            caller,
            REGISTRY_ID,
            f"the program's registry refused {caller!r}: it proved no member key of this run "
            "(a process of another run, or one given no grant)",
        )
    return PermissionDenied(caller, conn.node_id)


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
    cap: str | None = None,
) -> Any:
    """Blocking call of ``node_id.method(*args, **kwargs)`` with a deadline, presenting
    ``cap`` (the right to call ``node_id``); counted in the calling node's figures
    (``callstats``), calls to the registry aside."""
    if node_id == REGISTRY_ID or not callstats.active():
        return _call(program, node_id, method, args, kwargs, timeout, cap)
    start = time.perf_counter()
    ok = False
    try:
        value = _call(program, node_id, method, args, kwargs, timeout, cap)
        ok = True
    finally:
        seconds = time.perf_counter() - start
        callstats.made(program, callstats.caller(), node_id, method, seconds, ok)
    return value


def _call(
    program: ProgramContext,
    node_id: str,
    method: str,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    timeout: float,
    cap: str | None,
) -> Any:
    start = time.monotonic()
    deadline = start + timeout
    conn = _conn(program, node_id, cap, start, deadline)
    call_id = next(call_ids)
    frames = wire.request_frames(call_id, method, timeout, args, kwargs)
    check_size(frames, conn.limit, node_id, method)
    sock = conn.sock
    step = 0.02
    while True:
        try:
            wire.send(sock, frames, _NOBLOCK)
            if conn.monitor is not None:  # the first calls: did the handshake succeed?
                conn.refused()
            break
        except zmq.Again:
            pass
        remaining = deadline - time.monotonic()
        # a peer with no address waits for its restart -- unless the program is stopping
        stopping = conn.endpoint is None and program.address_book.stop_event.is_set()
        if remaining <= 0 or stopping:
            detail = (
                f"no connection to {conn.endpoint}"
                if conn.endpoint
                else "no address registered (its process ended)"
                + (", and the program is stopping" if stopping else "")
            )
            raise PeerUnavailable(node_id, time.monotonic() - start, detail)
        writable = conn.wait_writable(int(min(step, remaining) * 1000) + 1)
        if conn.refused():
            raise _refused(conn, cap)
        if not writable:
            conn.refresh()
            step = min(step * 2, 0.5)
    gone = 0  # looks in a row that found the peer's process gone (see peer_moved)
    while True:
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise zmq.Again
            # A blocking receive with a timeout: no poller to build for every call. Past
            # LOOK_S without a reply, the receive is cut into looks at the registry.
            wait_s = remaining if node_id == REGISTRY_ID else min(remaining, LOOK_S)
            sock.setsockopt(_RCVTIMEO, int(wait_s * 1000) + 1)
            frames = sock.recv_multipart(copy=False)
        except zmq.Again:
            if deadline - time.monotonic() > 0:
                moved = peer_moved(program, node_id, conn.endpoint, LOOK_S)
                gone = gone + 1 if moved else 0
                if gone < 2:
                    continue
                raise PeerUnavailable(
                    node_id,
                    time.monotonic() - start,
                    f"its process ended or restarted before it answered {method}()",
                ) from None
            try:  # the peer may have moved (restarted elsewhere): the next call goes there
                conn.refresh()
            except Exception:
                pass
            raise DeadlineExceeded(node_id, method, time.monotonic() - start) from None
        for msg in wire.parse_replies(frames):
            if msg.call_id == call_id:  # else a late reply to an earlier call that timed out
                return decode_reply(msg, node_id)
