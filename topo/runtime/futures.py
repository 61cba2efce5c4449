"""The futures engine: ``handle.futures.method(...)`` calls, pipelined.

Calling threads send on a per-peer DEALER under one I/O lock and pick up
replies themselves while they wait; one background thread per process
connects to peers, re-resolves them, retries sends, expires deadlines and
collects replies once callers have gone idle.

While calls to a peer are in flight, a new small call is held back (at most
``_HOLD_S``, or until its caller waits) and goes with the next ones as one
batch frame: a burst of futures costs one send instead of one per call.

Each (peer, right) pair has its own socket; calls to a peer that refuses the right
fail with ``PermissionDenied`` as soon as its refusal is seen.
"""

from __future__ import annotations

import collections
import heapq
import os
import sys
import threading
import time
import traceback
import uuid
from concurrent.futures import Future
from typing import Any

import zmq

from topo.runtime import callstats, client, wire
from topo.runtime.auth import zmq_context
from topo.runtime.client import call_ids, caller_name, check_size, close_socket
from topo.runtime.context import ProgramContext
from topo.runtime.errors import DeadlineExceeded, MessageTooLarge, PeerUnavailable
from topo.runtime.peers import (
    CallFuture,
    Done,
    Peer,
    Request,
    coalescable,
    count,
    fail,
    gone_peers,
    resolve,
    send_nowait,
    stale_peers,
)

_HOLD_S = 0.0005  # s a call may be held back for coalescing (by the caller)
_IDLE_AFTER = 0.002  # s without caller activity before the I/O thread watches replies
_SLICE_MS = 2  # a waiting caller polls its peer in slices this long (holding the I/O lock)
_LOOKUP_TIMEOUT_S = 2.0  # s the I/O thread may wait for the registry to resolve a peer
_LOOKUP_RETRY_S = 0.5  # s before a peer whose lookup failed is looked up again
_POLLIN = int(zmq.POLLIN)  # plain ints: pyzmq's enum flags cost microseconds per use
_EVENTS = int(zmq.EVENTS)
_NOBLOCK = wire.NOBLOCK
_MORE = int(zmq.NOBLOCK | zmq.SNDMORE)


class _Engine:
    """Per-process futures engine.

    The calling thread does the I/O in the common case: ``submit`` sends on
    the engine's DEALER for that peer and picks up replies that are already
    there; ``result()`` on a future that is not done yet polls that socket
    until the reply arrives. All sockets and in-flight state are guarded by
    one lock (a zmq socket is never used by two threads at once), and futures
    are resolved outside it. The I/O thread connects and re-resolves peers,
    sends what could not be sent yet, expires deadlines, and receives replies
    when no caller has been active for ``_IDLE_AFTER`` (so callbacks,
    ``concurrent.futures.wait`` and ``as_completed`` work without ``result()``).
    It then watches the sockets' file descriptors (ZMQ_FD) without the lock,
    after draining them (which re-arms the edge-triggered ZMQ_FD), and drains
    again at least every 10 ms in case a caller consumed a wake-up meanwhile.
    """

    def __init__(self) -> None:
        ctx = zmq_context()
        self._io = threading.Lock()
        self._active = 0.0  # monotonic time of the last submit / wait by a caller
        self._wake_pending = False
        self._io_timeout = 1000  # ms the I/O thread's current wait may last
        addr = f"inproc://topo-fut-{uuid.uuid4().hex[:12]}"
        self._rx = ctx.socket(zmq.PAIR)
        self._rx.bind(addr)
        self._tx = ctx.socket(zmq.PAIR)  # used under the I/O lock only
        self._tx.connect(addr)
        self._peers: dict[tuple[str, str, str | None], Peer] = {}
        self._inflight: dict[int, Request] = {}
        # (deadline, call id) of the calls in flight, soonest first: answered ones stay
        # until they come up or the heap is rebuilt (``_expire`` looks at due ones only).
        self._deadlines: list[tuple[float, int]] = []
        self._next_look = 0.0  # when the calls in flight are next looked at (gone_peers)
        threading.Thread(target=self._loop, name="topo-futures", daemon=True).start()

    # -- calling threads ----------------------------------------------------------
    def submit(
        self,
        program: ProgramContext,
        node_id: str,
        method: str,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        timeout: float,
        cap: str | None = None,
    ) -> Future:
        fut = CallFuture()
        fut._engine = self
        if callstats.active():
            fut._from = callstats.caller()
        start = time.monotonic()
        call_id = next(call_ids)
        frames = wire.request_frames(call_id, method, timeout, args, kwargs)
        req: Request = (program, node_id, method, call_id, frames, fut, start + timeout, start)
        done: Done = []
        with self._io:
            self._active = start
            key = (program.program_id, node_id, cap)
            peer = self._peers.get(key)
            if peer is None:
                peer = self._peers[key] = Peer(program, node_id, cap)
            try:  # (a peer not resolved yet: checked before its pending calls go)
                check_size(frames, peer.limit, node_id, method)
            except MessageTooLarge as exc:
                fut.set_exception(exc)
                return fut
            sock = peer.sock
            sent = False
            if sock is not None and not peer.pending:
                if peer.waiting and coalescable(frames):
                    # Calls are in flight to this peer: hold this one back briefly so
                    # that a burst goes as one batch (one send, one zmq message).
                    if not peer.outq:
                        peer.outq_at = start
                        if self._io_timeout >= 10 and not self._wake_pending:
                            # The I/O thread sleeps long: have it look again within 1 ms.
                            self._wake_pending = True
                            self._tx.send(b"")
                    peer.outq.append(req)
                    peer.outq_bytes += len(frames[0])
                    if (
                        len(peer.outq) >= wire.BATCH_MAX
                        or peer.outq_bytes >= wire.BATCH_BYTES
                        or start - peer.outq_at >= _HOLD_S
                    ):
                        self._send_outq(peer)
                    sent = True
                else:
                    try:
                        send_nowait(sock, frames)
                        sent = True
                    except zmq.Again:
                        pass
            if sent:
                fut._peer = peer
                peer.waiting += 1
                self._inflight[call_id] = req
                heapq.heappush(self._deadlines, (req[6], call_id))
                self._drain(peer, done, 1)
                if self._io_timeout > 10 and not self._wake_pending:
                    # The I/O thread sleeps watching no replies: have it watch this one,
                    # or a caller that only polls done() would wait out its sleep.
                    self._wake_pending = True
                    self._tx.send(b"")
            else:
                fut._caller = caller_name(program)
                peer.pending.append(req)
                if sock is not None:
                    self._drain(peer, done)
                if not self._wake_pending:
                    self._wake_pending = True
                    self._tx.send(b"")
        if done:
            resolve(done)
        return fut

    def drive(self, fut: CallFuture, timeout: float | None) -> None:
        """Receive replies on ``fut``'s socket until it is done (or ``timeout``)."""
        end = None if timeout is None else time.monotonic() + timeout
        cond = fut._condition  # type: ignore[attr-defined]
        while not fut.done():
            now = time.monotonic()
            if end is not None and now >= end:
                return
            wait = _SLICE_MS / 1000 if end is None else min(_SLICE_MS / 1000, end - now)
            peer = fut._peer
            if peer is None or not self._io.acquire(blocking=False):
                # Not sent yet (the I/O thread sends it) or another thread is receiving.
                with cond:
                    if not fut.done():
                        cond.wait(wait)
                continue
            done: Done = []
            try:
                self._active = now
                sock = peer.sock
                if sock is not None and peer is fut._peer:
                    if peer.outq:  # about to wait: nothing is held back any longer
                        self._send_outq(peer)
                    self._drain(peer, done)
                    if not done and sock.poll(max(1, int(wait * 1000)), _POLLIN):
                        self._drain(peer, done)
                self._active = time.monotonic()
            finally:
                self._io.release()
            if done:
                resolve(done)

    # -- under the I/O lock -------------------------------------------------------
    def _drain(self, peer: Peer, done: Done, most: int = -1) -> None:
        """Receive the replies waiting on ``peer``'s socket (at most ``most``).

        Draining completely leaves ZMQ_FD re-armed; ``submit`` takes only one
        reply per call (one ZMQ_EVENTS check instead of two in steady state).
        """
        sock = peer.sock
        assert sock is not None
        inflight = self._inflight
        while most and sock.get(_EVENTS) & _POLLIN:  # type: ignore[operator]
            most -= 1
            for msg in wire.parse_replies(sock.recv_multipart(flags=_NOBLOCK, copy=False)):
                req = inflight.pop(msg.call_id, None)
                if req is not None:
                    peer.waiting -= 1
                    done.append((req, msg, peer.node_id))

    def _send_outq(self, peer: Peer) -> None:
        """Send the calls held back for ``peer``: one message, or one batch frame."""
        sock = peer.sock
        assert sock is not None
        calls = [r[4][0] for r in peer.outq if not r[5].done()]
        if calls:
            frame = calls[0] if len(calls) == 1 else wire.batch_frame(calls)
            try:
                send_nowait(sock, [frame])
            except zmq.Again:
                # The peer is not connected (its process ended: it may have restarted
                # elsewhere): the I/O thread tries again, and looks the peer up again once
                # this lasts (``_flush``), as for calls not sent yet.
                if peer.blocked_since is None:
                    peer.blocked_since = time.monotonic()
                return
        peer.blocked_since = None
        peer.outq = []
        peer.outq_bytes = 0

    def _flush(self, peer: Peer, now: float, done: Done) -> None:
        stuck = peer.blocked_since is not None and now - peer.blocked_since > 0.05
        if now >= peer.next_lookup and (peer.sock is None or stuck):
            peer.next_lookup = now + (0.02 if peer.sock is None else 0.1)
            try:
                peer.connect(_LOOKUP_TIMEOUT_S)
            except Exception:  # the registry is slow or gone: its calls expire meanwhile
                peer.next_lookup = time.monotonic() + _LOOKUP_RETRY_S
        if peer.sock is None:
            return
        if peer.outq:  # held back, then found not connected: they go first
            self._send_outq(peer)
        self._send_pending(peer, now, done)

    def _send_pending(self, peer: Peer, now: float, done: Done) -> None:
        assert peer.sock is not None
        pending = peer.pending
        while pending:
            # Up to BATCH_MAX small one-frame calls in a row go as one batch frame.
            n = 0
            while n < min(len(pending), wire.BATCH_MAX) and coalescable(pending[n][4]):
                n += 1
            frames = [wire.batch_frame([pending[i][4][0] for i in range(n)])] if n > 1 else None
            try:
                send_nowait(peer.sock, frames or pending[0][4])
            except zmq.Again:
                if peer.blocked_since is None:
                    peer.blocked_since = now
                if peer.monitor is not None and peer.handshakes():
                    peer.refuse_all()
                    return
                break
            peer.blocked_since = None
            if peer.monitor is not None:  # connected: close the monitor once it says so
                peer.handshakes()
            for _ in range(n if frames else 1):
                req = pending.popleft()
                req[5]._peer = peer
                peer.waiting += 1
                self._inflight[req[3]] = req
                heapq.heappush(self._deadlines, (req[6], req[3]))
        self._drain(peer, done)

    def _expire(self, now: float) -> list[tuple[Future, BaseException]]:
        """Fail the calls past their deadline: in flight (the due ones only, from the
        heap: thousands of calls in flight cost nothing between deadlines) and waiting."""
        failed: list[tuple[Future, BaseException]] = []
        heap, inflight = self._deadlines, self._inflight
        while heap and heap[0][0] <= now:
            req = inflight.pop(heapq.heappop(heap)[1], None)
            if req is None:  # answered meanwhile
                continue
            peer = req[5]._peer
            if peer is not None:
                peer.waiting -= 1
            count(req, now, False)
            failed.append((req[5], DeadlineExceeded(req[1], req[2], now - req[7])))
        if len(heap) > 2 * len(inflight) + 1024:  # mostly answered calls: keep it small
            self._deadlines = [(r[6], call_id) for call_id, r in inflight.items()]
            heapq.heapify(self._deadlines)
        for peer in self._peers.values():
            if not any(r[6] <= now for r in peer.pending):
                continue
            keep: collections.deque[Request] = collections.deque()
            for r in peer.pending:
                if r[6] > now:
                    keep.append(r)
                    continue
                detail = (
                    f"no connection to {peer.endpoint}"
                    if peer.endpoint
                    else "no address registered"
                )
                failed.append((r[5], PeerUnavailable(r[1], now - r[7], detail)))
            peer.pending = keep
        return failed

    def _forget_ended(self) -> None:
        """Close the idle connections to programs this process has left (under the lock)."""
        for key, peer in list(self._peers.items()):
            if client.has_left(key[0]) and not peer.pending and not peer.waiting:
                del self._peers[key]
                if peer.sock is not None:
                    close_socket(peer.sock, peer.monitor)

    # -- the I/O thread -----------------------------------------------------------
    def _loop(self) -> None:
        """The I/O thread: ``_serve`` again after a fault (it was the only thread that
        expires deadlines and sends calls not sent yet; had it ended, every later call of
        this process could wait for ever). The fault is printed once per kind: its type
        and where it was raised (its message may differ each time, a waited duration)."""
        seen: set[tuple[str, str, int | None]] = set()
        while True:
            try:
                self._serve()
            except Exception as exc:
                frames = traceback.extract_tb(exc.__traceback__)
                kind = (type(exc).__name__, frames[-1].filename, frames[-1].lineno)
                if kind not in seen:
                    seen.add(kind)
                    print(
                        "topo: the futures engine's I/O thread hit a fault and goes on:\n"
                        + "".join(traceback.format_exception(exc)),
                        file=sys.stderr,
                        flush=True,
                    )
                self._wake_pending = False
                time.sleep(0.01)

    def _serve(self) -> None:
        next_expire = 0.0
        swept = 0
        watched: tuple[int, ...] = ()
        poller = zmq.Poller()
        poller.register(self._rx, zmq.POLLIN)
        while True:
            now = time.monotonic()
            waiting = any(p.pending for p in self._peers.values())
            idle = now - self._active >= _IDLE_AFTER
            # Watch replies only while no caller is receiving them itself.
            want = (
                tuple(p.fd for p in self._peers.values() if p.sock is not None)
                if idle and self._inflight
                else ()
            )
            if want != watched:
                if want:  # callers may have left replies unread: re-arm ZMQ_FD first
                    done0: Done = []
                    with self._io:
                        for peer in self._peers.values():
                            if peer.sock is not None:
                                self._drain(peer, done0)
                    if done0:
                        resolve(done0)
                for fd in watched:
                    poller.unregister(fd)
                for fd in want:
                    poller.register(fd, zmq.POLLIN)
                watched = want
            if any(p.outq for p in self._peers.values()):
                timeout = 1  # calls held back for coalescing go out within about 1 ms
            elif waiting:
                timeout = 5
            elif self._inflight:
                timeout = 10 if idle else int(_IDLE_AFTER * 1000)
            else:
                timeout = 1000
            self._io_timeout = timeout
            events = dict(poller.poll(timeout))
            if self._rx in events:
                while True:
                    try:
                        self._rx.recv(_NOBLOCK)
                    except zmq.Again:
                        break
            done: Done = []
            failed: list[tuple[Future, BaseException]] = []
            with self._io:
                self._wake_pending = False
                now = time.monotonic()
                for peer in self._peers.values():
                    if peer.pending or (peer.outq and peer.blocked_since is not None):
                        self._flush(peer, now, done)
                    elif peer.sock is not None:
                        if peer.monitor is not None and not peer.blocked_since:
                            peer.handshakes()  # connected: its monitor can go
                        if peer.outq and now - peer.outq_at >= _HOLD_S:
                            self._send_outq(peer)
                        self._drain(peer, done)
                if now >= next_expire:
                    failed = self._expire(now)
                    next_expire = now + 0.01
                if swept != client.ended_generation():
                    swept = client.ended_generation()
                    self._forget_ended()
                for peer in self._peers.values():
                    if peer.refused:
                        failed.extend(peer.refused)
                        peer.refused = []
            if done:
                resolve(done)
            if now >= self._next_look:
                self._next_look = now + client.LOOK_S
                failed.extend(self._fail_gone(now))
            for fut, exc in failed:
                fail(fut, exc)

    def _fail_gone(self, now: float) -> list[tuple[Future, BaseException]]:
        """The calls in flight whose peer's process is gone, taken out to fail (see
        ``gone_peers``; the registry is asked outside the lock)."""
        with self._io:
            stale = stale_peers(self._inflight, now, client.LOOK_S)
        gone = gone_peers(stale, _LOOKUP_TIMEOUT_S) if stale else set()
        if not gone:
            return []
        failed: list[tuple[Future, BaseException]] = []
        with self._io:
            at = time.monotonic()
            for call_id, req in list(self._inflight.items()):
                peer = req[5]._peer
                if peer is None or id(peer) not in gone or req[7] > now:
                    continue  # (one sent after the look: it may be answered)
                del self._inflight[call_id]
                peer.waiting -= 1
                count(req, at, False)
                why = f"its process ended or restarted before it answered {req[2]}()"
                failed.append((req[5], PeerUnavailable(req[1], at - req[7], why)))
        return failed


_engine: _Engine | None = None
_engine_lock = threading.Lock()


def _forget_engine() -> None:
    global _engine, _engine_lock
    _engine = None  # the I/O thread does not exist in a forked child
    _engine_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_engine)


def engine() -> _Engine:
    """This process's futures engine (started on first use, re-created after fork)."""
    global _engine
    eng = _engine
    if eng is None:
        with _engine_lock:
            if _engine is None:
                _engine = _Engine()
            eng = _engine
    return eng
