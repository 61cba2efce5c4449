"""Serving one node object over zmq.

Layout: an authenticated ROUTER (tcp, random port) is joined to an inproc
DEALER by ``zmq.proxy_steerable`` running in C (no GIL); ``threads`` worker
threads each own a DEALER on that inproc endpoint and run handlers, so the
thread pool size is exactly ``threads``. Per-worker queues are capped (HWM 1)
so a busy worker is skipped by the load balancer. Invalid messages are
dropped with a (rate-limited) log line; the server keeps serving.
"""

from __future__ import annotations

import collections
import inspect
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import zmq

from topo.runtime import transport, wire
from topo.runtime.auth import secure_server, zmq_context
from topo.runtime.batching import Batcher, batch_spec
from topo.runtime.context import (
    DEFAULT_MAX_MESSAGE_BYTES,
    NodeInfo,
    ProgramContext,
    add_process_node,
    current_program,
    enter_node_scope,
    node_scope,
    remove_process_node,
)
from topo.runtime.errors import UnknownMethod, encode_exception

log = logging.getLogger("topo.runtime.server")
_NOBLOCK = wire.NOBLOCK
_LINGER_MS = 200  # how long a closing server keeps sending queued replies
_REPLY_FLUSH_S = 0.02
NOT_SERVED = frozenset({"run"})


def public_methods(obj: Any) -> dict[str, Callable[..., Any]]:
    """The methods a node serves: public callables (not ``run``) and ``__call__``."""
    methods: dict[str, Callable[..., Any]] = {}
    cls = type(obj)
    for name in dir(cls):
        if name.startswith("_") or name in NOT_SERVED:
            continue
        static = inspect.getattr_static(cls, name, None)
        if isinstance(static, property):
            continue
        attr = getattr(obj, name, None)
        if callable(attr):
            methods[name] = attr
    if "__call__" in dir(cls) and not isinstance(obj, type) and not inspect.isfunction(obj):
        methods["__call__"] = obj.__call__
    return methods


class _DropLog:
    """Counts dropped messages; logs the first few and then every 1000th."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.count = 0
        self._lock = threading.Lock()

    def __call__(self, reason: str) -> None:
        with self._lock:
            self.count += 1
            n = self.count
        if n <= 10 or n % 1000 == 0:
            log.warning("topo node %s: dropped message #%d: %s", self.node_id, n, reason)


class NodeServer:
    """Serves ``obj``'s methods for one node; ``endpoint`` is its address (ipc path or tcp)."""

    def __init__(
        self,
        obj: Any,
        node: NodeInfo,
        program: ProgramContext,
        *,
        threads: int = 4,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        register: bool = True,
        bind_host: str | None = None,
        advertise_host: str | None = None,
        track: bool = True,
    ) -> None:
        if threads < 1:
            raise ValueError("threads must be >= 1")
        self.node = node
        self.program = program
        self.threads = threads
        self.max_message_bytes = max_message_bytes
        self.methods = public_methods(obj)
        self._method_names = sorted(self.methods)
        self.dropped = _DropLog(node.id)
        self._closed = threading.Event()
        self._close_lock = threading.Lock()
        self._registered = register
        front, self.endpoint = self._bind_front(bind_host or program.bind_host, advertise_host)
        tag = uuid.uuid4().hex[:12]
        self._inner = f"inproc://topo-srv-{tag}"
        self._start_proxy(front, tag)
        self._outbox: collections.deque[tuple[Any, list[Any]]] = collections.deque()
        self._wake_addr = f"inproc://topo-wake-{tag}"
        self._wake_lock = threading.Lock()
        self._setup_batchers()
        self._stop_addr = f"inproc://topo-stop-{tag}"
        # The pool grows on demand up to `threads`: a new handler thread starts when every
        # running one is busy, so idle nodes keep one thread and a busy one gets all.
        self._workers: list[threading.Thread] = []
        self._pool_lock = threading.Lock()
        self._busy = 0
        self._grow()
        self._track = track
        if track:
            add_process_node(node)
        if register:
            program.address_book.register(node.id, self.endpoint)

    # -- set-up ---------------------------------------------------------------
    def _bind_front(self, host: str, advertise_host: str | None) -> tuple[zmq.Socket, str]:
        """The authenticated ROUTER clients connect to (an ipc path on one host, else a
        random tcp port), and the endpoint peers dial."""
        front = zmq_context().socket(zmq.ROUTER)
        front.linger = 0
        front.maxmsgsize = self.max_message_bytes
        front.sndhwm = 0  # a ROUTER drops replies at HWM; clients bound what is in flight
        transport.check_mechanism(self.program.mechanism, self.program.ipc_dir)
        secure_server(front, self.program.security)
        endpoint = transport.bind(
            front, ipc_dir=self.program.ipc_dir, bind_host=host, advertise_host=advertise_host
        )
        return front, endpoint

    def _start_proxy(self, front: zmq.Socket, tag: str) -> None:
        """One handler thread owns ``front`` directly; more share it through a C proxy."""
        self._direct: zmq.Socket | None = None
        self._ctl: zmq.Socket | None = None
        self._proxy: threading.Thread | None = None
        if self.threads == 1:  # the only handler thread owns the ROUTER: no proxy hop
            self._direct = front
            return
        ctx = zmq_context()
        back = ctx.socket(zmq.DEALER)
        back.linger = 0
        back.sndhwm = 1
        back.bind(self._inner)
        ctl = ctx.socket(zmq.PAIR)
        ctl.bind(f"inproc://topo-ctl-{tag}")
        self._ctl = ctx.socket(zmq.PAIR)
        self._ctl.linger = 0
        self._ctl.connect(f"inproc://topo-ctl-{tag}")
        self._proxy = threading.Thread(
            target=self._run_proxy,
            args=(front, back, ctl),
            name=f"topo-proxy-{self.node.id}",
            daemon=True,
        )
        self._proxy.start()

    def _setup_batchers(self) -> None:
        """A ``Batcher`` per ``@batched`` method, and the socket that wakes handler threads
        when a batched reply is ready."""
        self._batchers: dict[str, Batcher] = {}
        self._wake: zmq.Socket | None = None
        for name, fn in self.methods.items():
            spec = batch_spec(fn)
            if spec is None:
                continue
            if self._wake is None:
                self._wake = zmq_context().socket(zmq.PUB)
                self._wake.linger = 0
                self._wake.bind(self._wake_addr)
            self._batchers[name] = Batcher(
                fn, spec, self._batch_reply, f"{self.node.id}.{name}", init=self._enter_scope
            )

    # -- threads --------------------------------------------------------------
    def _grow(self) -> None:
        """Start one more handler thread, unless closed or the pool is full."""
        with self._pool_lock:
            if self._closed.is_set() or len(self._workers) >= self.threads:
                return
            t = threading.Thread(
                target=self._work,
                args=(len(self._workers),),
                name=f"topo-h-{self.node.id}-{len(self._workers)}",
                daemon=True,
            )
            self._workers.append(t)
        t.start()

    def _handle_counted(self, sock: zmq.Socket, request: list[Any]) -> None:
        with self._pool_lock:
            self._busy += 1
            full = self._busy >= len(self._workers)
        if full:
            self._grow()
        try:
            self._handle(sock, request)
        finally:
            with self._pool_lock:
                self._busy -= 1

    def _enter_scope(self) -> None:
        enter_node_scope(self.program, self.node)

    @staticmethod
    def _run_proxy(front: zmq.Socket, back: zmq.Socket, ctl: zmq.Socket) -> None:
        try:
            zmq.proxy_steerable(front, back, None, ctl)
        except zmq.ZMQError:
            pass
        finally:
            front.close(linger=_LINGER_MS)  # replies already queued still go out
            back.close(linger=0)
            ctl.close(linger=0)

    def _work(self, index: int) -> None:
        """One handler thread. It blocks without a timeout (idle nodes cost no CPU) and
        wakes on a request, on a batched reply to send, or on its stop socket."""
        self._enter_scope()
        ctx = zmq_context()
        if self._direct is not None:
            sock = self._direct
        else:
            sock = ctx.socket(zmq.DEALER)
            sock.linger = 0
            sock.rcvhwm = 1
            sock.connect(self._inner)
        stop = ctx.socket(zmq.PAIR)
        stop.linger = 0
        stop.bind(f"{self._stop_addr}-{index}")
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        poller.register(stop, zmq.POLLIN)
        wake = None
        if self._batchers:
            wake = ctx.socket(zmq.SUB)
            wake.linger = 0
            wake.subscribe(b"")
            wake.connect(self._wake_addr)
            poller.register(wake, zmq.POLLIN)
        try:
            while not self._closed.is_set():
                # Batched replies are announced on `wake`; a short timeout also covers a
                # reply published before that subscription took effect.
                events = dict(poller.poll(100 if wake is not None else None))
                if stop in events:
                    break
                if wake is not None and wake in events:
                    while wake.poll(0):
                        wake.recv()
                while self._outbox:
                    try:
                        ident, frames = self._outbox.popleft()
                    except IndexError:
                        break
                    wire.send(sock, frames, prefix=ident)
                if sock in events:
                    while True:  # everything that has arrived, then back to waiting
                        try:
                            request = sock.recv_multipart(flags=_NOBLOCK, copy=False)
                        except zmq.Again:
                            break
                        self._handle_counted(sock, request)
        finally:
            sock.close(linger=_LINGER_MS if sock is self._direct else 0)
            stop.close(linger=0)
            if wake is not None:
                wake.close(linger=0)

    # -- request handling -------------------------------------------------------
    def _handle(self, sock: zmq.Socket, frames: list[Any]) -> None:
        if len(frames) < 2:
            self.dropped(f"{len(frames)} frames, expected at least 2")
            return
        ident = frames[0]
        msg = wire.parse(frames[1:])
        if msg is None or msg.kind != wire.K_CALL:
            self.dropped("not a topo request (bad or truncated header)")
            return
        call_id = msg.call_id
        size = wire.frames_nbytes(frames)
        if size > self.max_message_bytes:
            self.dropped(f"message of {size} bytes exceeds limit {self.max_message_bytes}")
            self._send(
                sock,
                ident,
                wire.K_FAULT,
                call_id,
                f"message of {size} bytes exceeds the node's limit "
                f"({self.max_message_bytes} bytes)",
            )
            return
        method = msg.method
        fn = self.methods.get(method)
        if fn is None:
            self._send(
                sock,
                ident,
                wire.K_ERROR,
                call_id,
                encode_exception(
                    UnknownMethod(self.node.id, method, self._method_names), self.node.id
                ),
            )
            return
        try:
            args, kwargs = wire.loads(msg.payload, msg.buffers)
            if not isinstance(args, tuple) or not isinstance(kwargs, dict):
                raise TypeError("payload is not (args, kwargs)")
        except Exception as exc:
            self.dropped(f"undecodable payload for {method!r}: {exc!r}")
            self._send(sock, ident, wire.K_FAULT, call_id, f"undecodable request: {exc!r}")
            return
        batcher = self._batchers.get(method)
        if batcher is not None:
            batcher.submit((ident, call_id), args, kwargs)
            return
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            self._send(sock, ident, wire.K_ERROR, call_id, encode_exception(exc, self.node.id))
            return
        self._send(sock, ident, wire.K_OK, call_id, result)

    def _reply_frames(self, kind: int, call_id: int, value: Any) -> list[Any]:
        try:
            return wire.reply_frames(kind, call_id, value)
        except Exception as exc:  # e.g. an unpicklable result
            try:
                return wire.reply_frames(wire.K_ERROR, call_id, encode_exception(exc, self.node.id))
            except Exception:
                return wire.reply_frames(wire.K_FAULT, call_id, f"unpicklable reply: {exc!r}")

    def _send(self, sock: zmq.Socket, ident: Any, kind: int, call_id: int, value: Any) -> None:
        wire.send(sock, self._reply_frames(kind, call_id, value), prefix=ident)

    def _batch_reply(self, token: Any, ok: bool, value: Any) -> None:
        ident, call_id = token
        if ok:
            frames = self._reply_frames(wire.K_OK, call_id, value)
        else:
            frames = self._reply_frames(
                wire.K_ERROR, call_id, encode_exception(value, self.node.id)
            )
        self._outbox.append((ident, frames))
        with self._wake_lock:
            if self._wake is not None:
                self._wake.send(b"")

    # -- lifecycle ----------------------------------------------------------------
    def close(self, timeout: float = 5.0) -> None:
        """Unregister, stop serving and join the server's threads."""
        with self._close_lock:
            if self._closed.is_set():
                return
            self._closed.set()
        # When the whole program stops there is nobody left to tell: skipping the
        # unregister call spares the registry one request per node at shutdown.
        if self._registered and not self.program.stop_event.is_set():
            try:
                self.program.address_book.unregister(self.node.id, self.endpoint)
            except Exception as exc:  # the registry may already be gone at shutdown
                log.debug("unregister %s failed: %r", self.node.id, exc)
        # Handler threads first: each finishes the request in hand and sends its reply.
        ctx = zmq_context()
        knocks = []
        with self._pool_lock:  # _closed is set: the pool cannot grow any more
            workers = list(self._workers)
        for i in range(len(workers)):
            # inproc connects before the bind, but a PAIR cannot queue a message until the
            # handler thread (maybe just started by the pool) has bound: wait for it.
            knock = ctx.socket(zmq.PAIR)
            knock.linger = 0
            knock.sndtimeo = int(timeout * 1000)
            knock.connect(f"{self._stop_addr}-{i}")
            try:
                knock.send(b"")
            except zmq.Again:  # the thread never got to listen; join() below times out
                log.warning(
                    "topo node %s: handler thread %d did not take the stop", self.node.id, i
                )
            knocks.append(knock)
        for t in workers:
            t.join(timeout)
        for knock in knocks:
            knock.close(linger=0)
        if self._ctl is not None and self._proxy is not None:
            # Then the proxy, once it has had a moment to forward those last replies
            # (libzmq's proxy acts on TERMINATE before pending messages).
            time.sleep(_REPLY_FLUSH_S)
            try:
                self._ctl.send(b"TERMINATE")
            except zmq.ZMQError:
                pass
            self._proxy.join(timeout)
            self._ctl.close(linger=0)
        for b in self._batchers.values():
            b.close()
        with self._wake_lock:
            if self._wake is not None:
                self._wake.close(linger=0)
                self._wake = None
        if self._track:
            remove_process_node(self.node.id)

    def __enter__(self) -> NodeServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def serve_node(
    obj: Any,
    node_id: str,
    group: str = "",
    replica: int = 0,
    *,
    program: ProgramContext | None = None,
    threads: int = 4,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    register: bool = True,
    bind_host: str | None = None,
    advertise_host: str | None = None,
) -> NodeServer:
    """Start serving ``obj`` as node ``node_id`` and register it in the address book."""
    return NodeServer(
        obj,
        NodeInfo(node_id, group or node_id, replica),
        program or current_program(),
        threads=threads,
        max_message_bytes=max_message_bytes,
        register=register,
        bind_host=bind_host,
        advertise_host=advertise_host,
    )


def run_node(
    obj: Any,
    node_id: str,
    group: str = "",
    replica: int = 0,
    *,
    program: ProgramContext | None = None,
    threads: int = 4,
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    bind_host: str | None = None,
    advertise_host: str | None = None,
) -> None:
    """Serve ``obj`` and run it: while ``obj.run()`` runs, or until the program stops.

    Exceptions from ``run()`` propagate (the backend decides to stop or restart).
    """
    prog = program or current_program()
    server = serve_node(
        obj,
        node_id,
        group,
        replica,
        program=prog,
        threads=threads,
        max_message_bytes=max_message_bytes,
        bind_host=bind_host,
        advertise_host=advertise_host,
    )
    try:
        with node_scope(prog, server.node):
            run = getattr(obj, "run", None)
            if callable(run):
                run()
            else:
                prog.stop_event.wait()
    finally:
        server.close()
