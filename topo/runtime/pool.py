"""A node server's handler threads: leader/followers over one ROUTER socket.

The *leader* is the one thread that owns the socket: it blocks in a receive,
runs the handler of the call it got itself, sends the reply and takes the next
call. An idle node therefore answers on the thread that received the call,
with no proxy hop and no hand-off, and pipelined calls are served back to back.
While more calls are waiting, one-frame replies to the same client are held
back and go out together as one batch frame (see ``wire``); a batch of calls
is put in the inbox, from which any leader takes the next one.

A *watcher* thread guards against a slow handler: when the leader has been
busy in one handler for ``PROMOTE_AFTER`` seconds, the watcher makes another
thread the leader (an idle follower, or a new thread while the pool is smaller
than ``threads``), which serves the calls that arrive meanwhile. A handler
that ends while someone else leads hands its reply to the leader through the
outbox and becomes a follower; if the leader is itself busy in a handler, the
finishing thread takes the socket over instead. So at most ``threads`` handlers
run at once, and a slow one delays the others by at most about
``PROMOTE_AFTER + TICK``.

When every thread is busy in a handler for ``RECEIVE_AFTER``, the watcher takes the
socket itself: calls that arrive wait in order (``stuck.Waiting``) for a thread to
come free, and one still waiting near its deadline is answered ``NodeBusy`` rather
than left to time out; the calls of the ``aside`` methods (the launcher's state door:
a snapshot's pause must not wait behind the calls it pauses) are served at once, each on
a thread of its own. Busy like that for ``busy_after_s``, the pool is flagged:
a warning with the handlers' stacks in the node's log, and ``on_busy`` is told (the
node reports it to the supervisor); told again (None) once a thread is free.

The socket is only ever touched by its owner, the leader; ownership changes
hands under ``_lock`` (a zmq socket must never be used by two threads at once).
Idle nodes cost no CPU: the leader blocks in a receive, followers and the
watcher on conditions without timeouts (the watcher ticks only while calls
come in). Wake-ups for the leader (outbox, stop) arrive on the socket itself.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import zmq

from topo.runtime import wire
from topo.runtime.auth import zmq_context
from topo.runtime.stuck import BusyFlag, OnBusy, Waiting, held_by

log = logging.getLogger("topo.runtime.pool")

PROMOTE_AFTER = 0.005  # s a handler may hold the socket's only thread before another leads
TICK = 0.005  # s between the watcher's looks while calls come in
IDLE_AFTER = 0.25  # s without a call before the watcher sleeps until the next one
_REPLY_FLUSH_S = 0.2  # s close() gives zmq to pass on replies sent just before or during it
_LATE_FLUSH_S = 0.05  # s close() waits when replies went out while it was closing
_ending_process = False  # the process ends once its servers close (see ends_after_close)

HOLD_S = 0.0005  # s a reply may be held back for coalescing at most
_NOBLOCK = wire.NOBLOCK
_MORE = wire.SNDMORE


def ends_after_close() -> None:
    """Say that this process ends right after its node servers close (a node's own
    process): a reply handed to zmq just before must be given time to leave, since zmq's
    I/O thread ends with the process. Elsewhere (the threads backend, a Ray worker) the
    process goes on, and closing does not wait."""
    global _ending_process
    _ending_process = True


_NEXT = -1  # leadership is vacant: the next thread to look takes it
_WATCHER = -2  # the watcher holds the socket: every handler thread is busy
RECEIVE_AFTER = 0.25  # s every thread is busy before the watcher takes calls in
RECEIVE_TICK = 0.1  # s between the watcher's looks while it holds the socket
BUSY_AFTER_S = 5.0  # s every thread is busy before the pool is flagged
_POLLIN = int(zmq.POLLIN)

# A handler gets a call (routing id, parsed request, its frames: None for a call of a
# batch) and returns (routing id, reply frames), or None when there is nothing to send
# now (dropped, or a batched call answered later).
Handler = Callable[[Any, wire.Message, "list[Any] | None"], "tuple[Any, list[Any]] | None"]
# The reply to a call given up because every thread stayed busy: (call, seconds busy,
# the methods holding the threads) -> reply frames, or None (not a call).
Refuse = Callable[[wire.Message, float, str], "list[Any] | None"]


class LeaderPool:
    """Serves ``sock`` with up to ``threads`` handler threads (see the module doc)."""

    def __init__(
        self,
        sock: zmq.Socket,
        handle: Handler,
        *,
        threads: int,
        name: str,
        init: Callable[[], None],
        linger_ms: int,
        dropped: Callable[[str], None],
        refuse: Refuse | None = None,
        on_busy: OnBusy | None = None,
        busy_after_s: float = BUSY_AFTER_S,
        aside: frozenset[str] = frozenset(),
    ) -> None:
        self._sock = sock
        self._refuse = refuse
        self._busy_after = busy_after_s
        self._flag = BusyFlag(name, threads, busy_after_s, on_busy)
        self._running: dict[int, tuple[str, float]] = {}  # thread -> (method, since)
        self._waiting = Waiting(aside)  # calls taken in by the watcher
        self._saturated_since: float | None = None  # every thread busy since then
        self._handle = handle
        self._max = threads
        self._name = name
        self._init = init
        self._linger_ms = linger_ms
        self._lock = threading.Lock()  # leadership, busy state and the pool's thread list
        self._followers = threading.Condition(self._lock)
        self._idle = 0  # followers waiting to lead
        self._leader = _NEXT  # thread ident of the leader, or _NEXT
        self._busy_since: float | None = None  # the leader is in a handler since then
        self._last_call = 0.0
        self._closed = False
        self._last_reply = 0.0  # when the last reply was handed to zmq (monotonic)
        self._replied_late = False  # a reply went out after close() began
        self._outbox: collections.deque[tuple[Any, list[Any]]] = collections.deque()
        # the calls of a batch not taken yet
        self._inbox: collections.deque[tuple[Any, wire.Message, None]] = collections.deque()
        self._held: list[bytes] = []  # replies held back (see _hold), to one client
        self._held_ident: Any = None
        self._held_key = b""
        self._held_at = 0.0
        self._held_bytes = 0
        self._dropped = dropped
        # Wake-ups (a reply in the outbox, the stop) reach the leader as an empty message
        # on the socket itself, over inproc (in-process only, so no handshake), so that
        # the leader can block in a plain receive as a hand-written server would.
        wake_addr = f"inproc://topo-wake-{uuid.uuid4().hex[:12]}"
        sock.bind(wake_addr)
        self._waker: zmq.Socket | None = zmq_context().socket(zmq.DEALER)
        self._waker.linger = 0
        self._waker.connect(wake_addr)
        self._wake_lock = threading.Lock()
        self.workers: list[threading.Thread] = []
        self.batches = 0  # batch frames received (coalesced calls)
        self._watch_cv = threading.Condition()
        self._watcher_asleep = True
        # With one thread there is nobody to promote: the watcher only looks for a busy pool.
        self._tick = TICK if threads > 1 else RECEIVE_AFTER / 5
        self._watcher = threading.Thread(target=self._watch, name=f"topo-w-{name}", daemon=True)
        self._watcher.start()
        with self._lock:
            self._spawn()

    # -- from any thread -------------------------------------------------------
    def post(self, ident: Any, frames: list[Any]) -> None:
        """Queue a reply for the leader to send (batched calls)."""
        with self._lock:
            self._outbox.append((ident, frames))
            self._signal()

    def close(self, timeout: float) -> None:
        """Stop: handlers finish the call in hand and send its reply; then join."""
        with self._lock:
            self._closed = True
            self._followers.notify_all()
            workers = list(self.workers)
        self._signal()
        with self._watch_cv:
            self._watch_cv.notify()
        now = time.monotonic()
        end = now + timeout
        with self._lock:  # a handler busy past busy_after_s is not waited for
            stuck = {i for i, (_, t0) in self._running.items() if now - t0 >= self._busy_after}
        for t in workers:
            if t.ident not in stuck:
                t.join(max(0.0, end - time.monotonic()))
        self._watcher.join(max(0.0, end - time.monotonic()))
        if any(t.is_alive() for t in workers):
            with self._lock:
                held = held_by(self._running)
            log.warning("topo node %s: handler threads did not stop (in %s)", self._name, held)
            return  # a thread may still use the socket: leave it to the process's end
        since = time.monotonic() - self._last_reply
        if _ending_process and since < _REPLY_FLUSH_S:
            # zmq's I/O thread passes replies on after send() returns; a process that ends
            # right after close() loses what it has not passed on yet, despite the linger
            # (a caller then waits out its deadline: seen under load). Give it the time.
            time.sleep(_REPLY_FLUSH_S - since)
        elif self._replied_late:
            # Replies sent just now can be lost when the socket closes at once, despite
            # its linger (seen under load): give zmq's I/O thread a moment to pass them on.
            time.sleep(_LATE_FLUSH_S)
        self._sock.close(linger=self._linger_ms)  # replies already queued still go out
        with self._wake_lock:
            if self._waker is not None:
                self._waker.close(linger=0)
                self._waker = None

    def _signal(self) -> None:
        with self._wake_lock:
            if self._waker is not None:  # else closed: nobody is left to wake
                try:
                    self._waker.send(b"", _NOBLOCK)
                except zmq.Again:  # wake-ups are queued already
                    pass

    # -- under self._lock ---------------------------------------------------------
    def _spawn(self) -> None:
        """Start a handler thread that will take the vacant leadership."""
        if self._closed or len(self.workers) >= self._max:
            return
        t = threading.Thread(
            target=self._run, name=f"topo-h-{self._name}-{len(self.workers)}", daemon=True
        )
        self.workers.append(t)
        t.start()

    def _appoint(self) -> None:
        """Make the leadership vacant and have a follower (or a new thread) take it."""
        self._leader = _NEXT
        self._busy_since = None
        if self._idle:
            self._followers.notify()
        else:
            self._spawn()

    # -- handler threads -------------------------------------------------------------
    def _run(self) -> None:
        self._init()
        me = threading.get_ident()
        try:
            while True:
                with self._lock:
                    while self._leader != _NEXT and not self._closed:
                        self._idle += 1
                        self._followers.wait()
                        self._idle -= 1
                    if self._closed and self._leader != _NEXT:
                        return
                    self._leader = me
                if self._lead(me):
                    return
        finally:
            with self._lock:
                if self._leader == me:
                    self._leader = _NEXT

    def _lead(self, me: int) -> bool:
        """Serve as the leader until deposed (False) or closed (True)."""
        sock = self._sock
        inbox = self._inbox
        while True:
            while self._outbox:
                ident, frames = self._outbox.popleft()
                wire.send(sock, frames, prefix=ident)
                self._last_reply = time.monotonic()
                if self._closed:
                    self._replied_late = True
            if self._closed:
                if self._held:
                    self._replied_late = True
                    self._flush_held()
                with self._lock:  # leave only with nothing left to send
                    if not self._outbox:
                        self._leader = _NEXT
                        return True
                continue
            request: tuple[Any, wire.Message, list[Any] | None]
            if self._waiting:  # calls that came in while every thread was busy go first
                taken = self._waiting.take()
                if taken is None:
                    continue
                request = taken
            elif inbox:
                try:
                    request = inbox.popleft()
                except IndexError:  # another leader took it
                    continue
            else:
                if self._held:  # out of work: what was held back goes now
                    self._flush_held()
                frames = sock.recv_multipart(copy=False)  # blocks; idle nodes cost nothing
                if len(frames) < 2:
                    self._dropped(f"{len(frames)} frames, expected at least 2")
                    continue
                if len(frames) == 2 and not len(frames[1]):  # a wake-up
                    continue
                msg = wire.parse(frames, 1)
                if msg is None:
                    self._dropped("not a topo request (bad or truncated header)")
                    continue
                if msg.kind == wire.K_BATCH:
                    unbatched = self._unbatch(frames[0], msg)
                    if unbatched is None:
                        continue
                    request = unbatched
                else:
                    request = (frames[0], msg, frames)
            now = time.monotonic()
            with self._lock:
                self._busy_since = now
                self._last_call = now
            if self._watcher_asleep:
                with self._watch_cv:
                    self._watcher_asleep = False
                    self._watch_cv.notify()
            running = self._running
            running[me] = (request[1].method, now)
            try:
                reply = self._handle(*request)
            except Exception:  # the server answers every call; this is a bug in topo
                log.exception("topo node %s: a request could not be handled", self._name)
                reply = None
            finally:
                del running[me]
            with self._lock:
                if self._leader == me:
                    self._busy_since = None
                elif self._leader == _NEXT or self._busy_since is not None:
                    # The leader is busy too (or there is none): take the socket over.
                    self._leader = me
                    self._busy_since = None
                else:
                    if reply is not None:
                        self._outbox.append(reply)
                        self._signal()
                    return False
            if reply is not None:
                if inbox or self._held:  # more calls of a batch are waiting
                    self._hold(reply[0], reply[1], now)
                else:
                    wire.send(sock, reply[1], prefix=reply[0])
                    self._last_reply = time.monotonic()
                    if self._closed:
                        self._replied_late = True
            if self._held and now - self._held_at >= HOLD_S:
                self._flush_held()

    def _unbatch(
        self, ident: Any, batch: wire.Message
    ) -> tuple[Any, wire.Message, list[Any] | None] | None:
        """The first call of a batch; the others go to the inbox, where any leader
        (also one appointed while this thread is busy) takes them."""
        calls = wire.split_batch(batch)
        if calls is None:
            self._dropped("a malformed batch of calls")
            return None
        if len(calls) < batch.call_id:
            self._dropped(f"{batch.call_id - len(calls)} bad calls in a batch")
        if not calls:
            return None
        self.batches += 1
        self._inbox.extend((ident, c, None) for c in calls[1:])
        return ident, calls[0], None

    # -- coalescing replies (socket owner only) ---------------------------------------------
    def _hold(self, ident: Any, frames: list[Any], now: float) -> None:
        """Hold a one-frame reply back while more calls are waiting, so that replies
        to a client that pipelines go out together in one batch frame."""
        if len(frames) != 1 or len(frames[0]) >= wire.SPLIT_AT:
            self._flush_held()
            wire.send(self._sock, frames, prefix=ident)
            self._last_reply = time.monotonic()
            return
        key = ident.bytes
        if self._held and key != self._held_key:
            self._flush_held()
        if not self._held:
            self._held_ident, self._held_key, self._held_at = ident, key, now
        self._held.append(frames[0])
        self._held_bytes += len(frames[0])
        if len(self._held) >= wire.BATCH_MAX or self._held_bytes >= wire.BATCH_BYTES:
            self._flush_held()

    def _flush_held(self) -> None:
        held = self._held
        if not held:
            return
        frame = held[0] if len(held) == 1 else wire.batch_frame(held)
        self._sock.send(self._held_ident, _MORE)
        self._sock.send(frame)
        self._last_reply = time.monotonic()
        self._held = []
        self._held_bytes = 0

    # -- the watcher ------------------------------------------------------------------
    def _watch(self) -> None:
        """Appoints a new leader when the leader is stuck in a slow handler; takes the
        calls in itself when every thread is (see the module doc)."""
        self._init()  # its warnings go to the node's own log
        while True:
            with self._watch_cv:
                if self._watcher_asleep and not self._closed:
                    self._watch_cv.wait()
            if self._closed:
                return
            time.sleep(self._tick)
            now = time.monotonic()
            receive = False
            with self._lock:
                since = self._busy_since
                saturated = len(self._running) >= self._max
                if since is not None and now - since >= PROMOTE_AFTER:
                    if self._idle or len(self.workers) < self._max:
                        self._appoint()
                elif since is None and not saturated and now - self._last_call >= IDLE_AFTER:
                    self._watcher_asleep = True
                if not saturated:
                    self._saturated_since = None
                elif self._saturated_since is None:
                    self._saturated_since = now
                elif since is not None and now - self._saturated_since >= RECEIVE_AFTER:
                    self._leader = _WATCHER  # the busy leader hands its reply over
                    self._busy_since = None
                    receive = True
            self._check_busy(now)
            if receive:
                self._receive()

    def _receive(self) -> None:
        """Hold the socket while every handler thread is busy: take calls in to wait,
        answer those whose deadline comes near, pass on the replies of handlers that
        end; hand the socket back as soon as a thread is free."""
        sock = self._sock
        while True:
            while self._outbox:
                ident, frames = self._outbox.popleft()
                wire.send(sock, frames, prefix=ident)
                self._last_reply = time.monotonic()
            now = time.monotonic()
            with self._lock:
                if self._closed or len(self._running) < self._max:
                    self._saturated_since = None
                    self._appoint()  # an idle follower, or the thread that ends, leads
                    if self._closed:
                        self._waiting.clear()
                        self._followers.notify_all()
                    break
                busy_s = now - (self._saturated_since or now)
                held = held_by(self._running)
            for ident, msg, _ in self._waiting.expired(now):
                reply = self._refuse(msg, busy_s, held) if self._refuse else None
                if reply is not None:
                    wire.send(sock, reply, prefix=ident)
                    self._last_reply = time.monotonic()
            self._check_busy(now)
            at = self._waiting.next_at()
            wait = RECEIVE_TICK if at is None else min(RECEIVE_TICK, max(0.0, at - now))
            if sock.poll(int(wait * 1000) + 1, _POLLIN):
                frames = sock.recv_multipart(copy=False)
                self._waiting.take_in(frames, time.monotonic(), self._dropped)
                for request in self._waiting.take_aside():
                    threading.Thread(
                        target=self._serve_aside,
                        args=(request,),
                        name=f"topo-a-{self._name}",
                        daemon=True,
                    ).start()
        self._check_busy(time.monotonic())

    def _serve_aside(self, request: tuple[Any, wire.Message, list[Any] | None]) -> None:
        """Serve one of the ``aside`` methods on a thread of its own, beside the busy
        handlers; its reply goes out through the outbox."""
        self._init()
        out = self._handle(*request)
        if out is not None:
            self.post(*out)

    def _check_busy(self, now: float) -> None:
        if self._saturated_since is None and self._flag.report is None:
            return  # nothing to flag or to clear
        with self._lock:
            since = self._saturated_since
            running = dict(self._running) if since is not None else {}
        self._flag.check(now, since, running)

    @property
    def flagged(self) -> dict[str, Any] | None:
        """The busy report while the pool is flagged, else None."""
        return self._flag.report
