"""Client side of topo RPC: blocking calls and the futures engine.

Blocking calls use a DEALER socket owned by the calling thread (one per
peer), so a call is one send and one receive with no thread hop. Futures go
through one I/O thread per process, which owns its own DEALERs, pipelines
requests and resolves futures as replies arrive. Both connect lazily,
resolve peers through the program's address book, wait for a peer that is
not up yet until the deadline, and re-resolve when a peer stops answering
connections (it may have restarted on another port).
"""

from __future__ import annotations

import collections
import itertools
import os
import threading
import time
import uuid
from concurrent.futures import Future, InvalidStateError
from typing import Any

import zmq

from topo.runtime import wire
from topo.runtime.auth import secure_client, zmq_context
from topo.runtime.context import ProgramContext
from topo.runtime.errors import (
    DeadlineExceeded,
    PeerUnavailable,
    ProtocolError,
    decode_exception,
)

_ids = itertools.count(1)
_endpoints: dict[tuple[str, str], str] = {}


def _new_socket(program: ProgramContext, endpoint: str) -> zmq.Socket:
    sock = zmq_context().socket(zmq.DEALER)
    sock.linger = 0
    sock.immediate = True  # no queueing towards a peer that is not connected
    sock.rcvhwm = 0
    secure_client(sock, program.security)
    sock.connect(endpoint)
    return sock


class _Conn:
    """One DEALER socket to one peer, used by a single thread."""

    def __init__(self, program: ProgramContext, node_id: str, endpoint: str) -> None:
        self.program = program
        self.node_id = node_id
        self.endpoint = endpoint
        self.sock = _new_socket(program, endpoint)

    def refresh(self) -> bool:
        """Re-resolve the peer; reconnect if it moved. True when it moved."""
        endpoint = self.program.address_book.lookup(self.node_id)
        if endpoint is None or endpoint == self.endpoint:
            return False
        self.sock.disconnect(self.endpoint)
        self.sock.connect(endpoint)
        self.endpoint = endpoint
        _endpoints[(self.program.program_id, self.node_id)] = endpoint
        return True


_local = threading.local()


def _conn(program: ProgramContext, node_id: str, start: float, deadline: float) -> _Conn:
    pid = os.getpid()
    if getattr(_local, "pid", None) != pid:
        _local.pid, _local.conns = pid, {}
    key = (program.program_id, node_id)
    conn: _Conn | None = _local.conns.get(key)
    if conn is None:
        endpoint = _endpoints.get(key) or program.address_book.wait_lookup(node_id, deadline)
        if endpoint is None:
            raise PeerUnavailable(node_id, time.monotonic() - start, "no address registered")
        _endpoints[key] = endpoint
        conn = _local.conns[key] = _Conn(program, node_id, endpoint)
    return conn


def decode_reply(kind: int, frames: list[Any], node_id: str) -> Any:
    """Turn reply frames (after the header) into a value, or raise the remote error."""
    if kind == wire.K_OK:
        return wire.loads(frames[0], frames[1:])
    if kind == wire.K_ERROR:
        raise decode_exception(wire.loads(frames[0], frames[1:]))
    if kind == wire.K_FAULT:
        raise ProtocolError(f"node {node_id!r} rejected the call: {frames[0].bytes.decode()}")
    raise ProtocolError(f"node {node_id!r} sent a reply of unknown kind {kind}")


def call(program: ProgramContext, node_id: str, method: str, args: tuple[Any, ...],
         kwargs: dict[str, Any], timeout: float) -> Any:
    """Blocking call of ``node_id.method(*args, **kwargs)`` with a deadline."""
    start = time.monotonic()
    deadline = start + timeout
    conn = _conn(program, node_id, start, deadline)
    call_id = next(_ids)
    frames = wire.request_frames(call_id, method, timeout, args, kwargs)
    sock = conn.sock
    step = 0.02
    while True:
        try:
            sock.send_multipart(frames, flags=zmq.NOBLOCK, copy=False)
            break
        except zmq.Again:
            pass
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise PeerUnavailable(node_id, time.monotonic() - start,
                                  f"no connection to {conn.endpoint}")
        if not sock.poll(int(min(step, remaining) * 1000) + 1, zmq.POLLOUT):
            conn.refresh()
            step = min(step * 2, 0.5)
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or not sock.poll(int(remaining * 1000) + 1, zmq.POLLIN):
            raise DeadlineExceeded(node_id, method, time.monotonic() - start)
        reply = sock.recv_multipart(copy=False)
        header = wire.unpack_header(reply[0].bytes)
        if header is None or header[1] != call_id or len(reply) < 2:
            continue  # a late reply to an earlier call that timed out
        return decode_reply(header[0], reply[1:], node_id)


class _Peer:
    """Futures-engine state for one peer (I/O thread only)."""

    def __init__(self, program: ProgramContext, node_id: str) -> None:
        self.program = program
        self.node_id = node_id
        self.endpoint: str | None = None
        self.sock: zmq.Socket | None = None
        self.pending: collections.deque[_Request] = collections.deque()
        self.next_lookup = 0.0
        self.blocked_since: float | None = None


_Request = tuple[Any, str, str, int, list[Any], Future, float, float]


class _Engine:
    """Per-process I/O thread that pipelines future calls."""

    def __init__(self) -> None:
        ctx = zmq_context()
        self.queue: collections.deque[_Request] = collections.deque()
        self._flag = False
        self._lock = threading.Lock()
        addr = f"inproc://topo-fut-{uuid.uuid4().hex[:12]}"
        self._rx = ctx.socket(zmq.PAIR)
        self._rx.bind(addr)
        self._tx = ctx.socket(zmq.PAIR)
        self._tx.connect(addr)
        self._peers: dict[tuple[str, str], _Peer] = {}
        self._by_sock: dict[zmq.Socket, _Peer] = {}
        self._inflight: dict[int, _Request] = {}
        self._poller = zmq.Poller()
        self._poller.register(self._rx, zmq.POLLIN)
        threading.Thread(target=self._loop, name="topo-futures", daemon=True).start()

    def submit(self, program: ProgramContext, node_id: str, method: str,
               args: tuple[Any, ...], kwargs: dict[str, Any], timeout: float) -> Future:
        fut: Future = Future()
        start = time.monotonic()
        call_id = next(_ids)
        frames = wire.request_frames(call_id, method, timeout, args, kwargs)
        self.queue.append((program, node_id, method, call_id, frames, fut,
                           start + timeout, start))
        if not self._flag:
            with self._lock:
                self._flag = True
                self._tx.send(b"")
        return fut

    def _peer(self, program: ProgramContext, node_id: str) -> _Peer:
        key = (program.program_id, node_id)
        peer = self._peers.get(key)
        if peer is None:
            peer = self._peers[key] = _Peer(program, node_id)
        return peer

    def _flush(self, peer: _Peer, now: float) -> None:
        stuck = peer.blocked_since is not None and now - peer.blocked_since > 0.05
        if now >= peer.next_lookup and (peer.sock is None or stuck):
            peer.next_lookup = now + (0.02 if peer.sock is None else 0.1)
            key = (peer.program.program_id, peer.node_id)
            endpoint = (_endpoints.get(key) if peer.sock is None else None) or (
                peer.program.address_book.lookup(peer.node_id))
            if endpoint is not None and endpoint != peer.endpoint:
                _endpoints[key] = endpoint
                if peer.sock is None:
                    peer.sock = _new_socket(peer.program, endpoint)
                    self._by_sock[peer.sock] = peer
                    self._poller.register(peer.sock, zmq.POLLIN)
                else:
                    if peer.endpoint is not None:
                        peer.sock.disconnect(peer.endpoint)
                    peer.sock.connect(endpoint)
                peer.endpoint = endpoint
        if peer.sock is None:
            return
        while peer.pending:
            req = peer.pending[0]
            try:
                peer.sock.send_multipart(req[4], flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                if peer.blocked_since is None:
                    peer.blocked_since = now
                return
            peer.blocked_since = None
            peer.pending.popleft()
            self._inflight[req[3]] = req

    def _receive(self, peer: _Peer) -> None:
        assert peer.sock is not None
        while True:
            try:
                reply = peer.sock.recv_multipart(flags=zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            header = wire.unpack_header(reply[0].bytes)
            if header is None or len(reply) < 2:
                continue
            req = self._inflight.pop(header[1], None)
            if req is None:
                continue
            fut = req[5]
            try:
                fut.set_result(decode_reply(header[0], reply[1:], peer.node_id))
            except InvalidStateError:
                pass
            except BaseException as exc:
                _fail(fut, exc)

    def _expire(self, now: float) -> None:
        for call_id, req in list(self._inflight.items()):
            if req[6] <= now:
                del self._inflight[call_id]
                _fail(req[5], DeadlineExceeded(req[1], req[2], now - req[7]))
        for peer in self._peers.values():
            if not any(r[6] <= now for r in peer.pending):
                continue
            keep: collections.deque[_Request] = collections.deque()
            for r in peer.pending:
                if r[6] > now:
                    keep.append(r)
                    continue
                detail = (f"no connection to {peer.endpoint}" if peer.endpoint
                          else "no address registered")
                _fail(r[5], PeerUnavailable(r[1], now - r[7], detail))
            peer.pending = keep

    def _loop(self) -> None:
        next_expire = 0.0
        while True:
            waiting = any(p.pending for p in self._peers.values())
            timeout = 5 if waiting else (50 if self._inflight else 1000)
            events = dict(self._poller.poll(timeout))
            if self._rx in events:
                while True:
                    try:
                        self._rx.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
            self._flag = False
            now = time.monotonic()
            while self.queue:
                req = self.queue.popleft()
                self._peer(req[0], req[1]).pending.append(req)
            for sock in events:
                peer = self._by_sock.get(sock)
                if peer is not None:
                    self._receive(peer)
            for peer in self._peers.values():
                if peer.pending:
                    self._flush(peer, now)
            if now >= next_expire:
                self._expire(now)
                next_expire = now + 0.01


def _fail(fut: Future, exc: BaseException) -> None:
    try:
        fut.set_exception(exc)
    except InvalidStateError:
        pass


_engine: _Engine | None = None
_engine_pid = -1
_engine_lock = threading.Lock()


def engine() -> _Engine:
    """This process's futures engine (started on first use, re-created after fork)."""
    global _engine, _engine_pid
    if _engine is None or _engine_pid != os.getpid():
        with _engine_lock:
            if _engine is None or _engine_pid != os.getpid():
                _engine, _engine_pid = _Engine(), os.getpid()
    return _engine
