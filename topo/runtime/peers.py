"""The futures engine's view of one peer: its connection (looked up, connected, its
right accepted or refused), the requests it has in flight, and how their futures
complete (``topo.runtime.futures`` drives them)."""

from __future__ import annotations

import collections
import time
from concurrent.futures import Future, InvalidStateError
from typing import Any

import zmq

from topo.runtime import callstats, wire
from topo.runtime.client import (
    check_size,
    close_monitor,
    close_socket,
    decode_reply,
    endpoints,
    handshakes,
    new_socket,
    peer_limit,
    peer_moved,
)
from topo.runtime.context import ProgramContext
from topo.runtime.errors import MessageTooLarge, PermissionDenied
from topo.runtime.rights import REGISTRY_ID


class Peer:
    """Futures-engine state for one peer (guarded by the engine's I/O lock)."""

    def __init__(self, program: ProgramContext, node_id: str, cap: str | None) -> None:
        self.program = program
        self.node_id = node_id
        self.cap = cap
        self.endpoint: str | None = None
        self.sock: zmq.Socket | None = None
        self.monitor: zmq.Socket | None = None
        self.fd = -1
        self.pending: collections.deque[Request] = collections.deque()
        self.next_lookup = 0.0
        self.blocked_since: float | None = None
        self.waiting = 0  # calls sent (or in outq) that have no reply yet
        self.outq: list[Request] = []  # one-frame calls held back to go as one batch
        self.outq_at = 0.0
        self.outq_bytes = 0
        self.limit: int | None = None  # the largest request it accepts, once resolved
        self.refused: list[tuple[Future, BaseException]] = []  # too large, found late
        self.gone_looks = 0  # looks in a row that found its process gone (see gone_peers)

    def connect(self, lookup_timeout: float) -> None:
        """Look this peer up in its program's address book and (re)connect there. The
        lookup is bounded (``lookup_timeout``): the engine's I/O thread alone expires the
        calls' deadlines, so a registry busy or gone with its program must not hold it."""
        key = (self.program.program_id, self.node_id)
        endpoint = (endpoints.get(key) if self.sock is None else None) or (
            self.program.address_book.lookup(self.node_id, timeout=lookup_timeout)
        )
        if endpoint is None and self.sock is not None and self.endpoint is not None:
            # The registry dropped it (its process ended): stop reconnecting there.
            self.sock.disconnect(self.endpoint)
            self.endpoint = None
            endpoints.pop(key, None)
        elif endpoint is not None and endpoint != self.endpoint:
            endpoints[key] = endpoint
            if self.sock is None:
                self.sock, self.monitor = new_socket(self.program, endpoint, self.node_id, self.cap)
                self.fd = self.sock.getsockopt(zmq.FD)  # type: ignore[assignment]
                self.limit = peer_limit(self.program, self.node_id)
                self.refuse_oversized()
            else:
                if self.endpoint is not None:
                    self.sock.disconnect(self.endpoint)
                self.sock.connect(endpoint)
            self.endpoint = endpoint

    def handshakes(self) -> bool:
        """Whether this peer refused our right; its monitor is closed once it accepted it."""
        assert self.sock is not None and self.monitor is not None
        refused, accepted = handshakes(self.monitor, self.endpoint)
        if accepted and not refused:
            close_monitor(self.sock, self.monitor)
            self.monitor = None
        return refused

    def refuse_all(self) -> None:
        """This peer refused our right: its waiting calls fail, its socket is closed (the
        next call connects again, and is refused again, rather than retry in a loop)."""
        for r in self.pending:
            self.refused.append((r[5], PermissionDenied(r[5]._caller, self.node_id)))
        self.pending.clear()
        assert self.sock is not None
        close_socket(self.sock, self.monitor)
        self.sock = self.monitor = None
        self.endpoint = None
        self.fd = -1
        self.blocked_since = None

    def refuse_oversized(self) -> None:
        """Take the pending calls larger than this peer accepts off its queue; they fail
        with the size error (calls submitted before the peer was resolved)."""
        if self.limit is None:
            return
        keep: collections.deque[Request] = collections.deque()
        for r in self.pending:
            try:
                check_size(r[4], self.limit, r[1], r[2])
                keep.append(r)
            except MessageTooLarge as exc:
                self.refused.append((r[5], exc))
        self.pending = keep


# (program, node_id, method, call_id, frames, future, deadline, start)
Request = tuple[Any, str, str, int, list[Any], "CallFuture", float, float]
Done = list[tuple[Request, wire.Message, str]]
COALESCE_UNDER = 4096  # bytes: larger calls go at once, on their own


def send_nowait(sock: zmq.Socket, frames: list[Any]) -> None:
    """Send without blocking; raises ``zmq.Again`` only on the first frame (libzmq
    delivers a multipart message atomically once its first part is queued)."""
    wire.send(sock, frames, wire.NOBLOCK)


def coalescable(frames: list[Any]) -> bool:
    """Whether a call may travel in a batch frame (one small frame)."""
    return len(frames) == 1 and len(frames[0]) < COALESCE_UNDER


class CallFuture(Future):
    """A Future whose ``result()`` / ``exception()`` receive replies themselves."""

    _engine: Any  # the futures engine that drives it (topo.runtime.futures)
    _peer: Peer | None = None  # set once the request is on the socket
    _caller = ""  # who made the call, noted for calls that wait to be sent
    _from = ""  # the node that made the call, for its call figures ("": none)

    def result(self, timeout: float | None = None) -> Any:
        if not self.done():
            self._engine.drive(self, timeout)
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if not self.done():
            self._engine.drive(self, timeout)
        return super().exception(timeout)


def resolve(done: Done) -> None:
    """Decode replies and complete their futures (outside the I/O lock)."""
    now = time.monotonic()
    for req, msg, node_id in done:
        fut = req[5]
        count(req, now, msg.kind == wire.K_OK)
        try:
            value = decode_reply(msg, node_id)
        except BaseException as exc:
            fail(fut, exc)
            continue
        set_result(fut, value)


def count(req: Request, now: float, ok: bool) -> None:
    """A futures call ended (a reply, or its deadline): the calling node's figures."""
    fut = req[5]
    if fut._from:
        callstats.made(req[0], fut._from, req[1], req[2], now - req[7], ok)


def set_result(fut: Future, value: Any) -> None:
    """Complete ``fut`` unless it was cancelled or already timed out meanwhile."""
    try:
        fut.set_result(value)
    except InvalidStateError:
        pass


def fail(fut: Future, exc: BaseException) -> None:
    try:
        fut.set_exception(exc)
    except InvalidStateError:
        pass


def stale_peers(inflight: dict[int, Any], now: float, after: float) -> list[Peer]:
    """The peers with a call in flight unanswered for ``after`` seconds (the registry
    itself aside): those ``gone_peers`` looks at."""
    stale: dict[int, Peer] = {}
    for req in inflight.values():
        peer = req[5]._peer
        if (
            peer is not None
            and now - req[7] >= after
            and peer.node_id != REGISTRY_ID
            and peer.endpoint is not None
        ):
            stale[id(peer)] = peer
    return list(stale.values())


def gone_peers(peers: list[Peer], lookup_timeout: float) -> set[int]:
    """Of ``peers``, those (by id) whose process is gone: the registry no longer lists
    them at the address their calls went to, at two looks in a row (one a second; a reply
    can then never come, and waiting out the deadline held the caller). Called without
    the engine's lock: a registry slow to answer holds up no other call."""
    gone: set[int] = set()
    for peer in peers:
        moved = peer_moved(peer.program, peer.node_id, peer.endpoint, lookup_timeout)
        peer.gone_looks = peer.gone_looks + 1 if moved else 0
        if peer.gone_looks >= 2:
            peer.gone_looks = 0
            gone.add(id(peer))
    return gone
