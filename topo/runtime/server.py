"""Serving one node object over zmq.

An authenticated ROUTER (an ipc path on one host, a tcp port with CURVE
across hosts) accepts only callers that hold the node's token (``rights``); it is
served by a leader/followers pool of at most ``threads`` handler threads
(``pool.py``): the thread that receives a call runs it and replies, so an idle node
answers with no thread hop. Invalid messages are
dropped with a (rate-limited) log line; the server keeps serving.
"""

from __future__ import annotations

import inspect
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from topo.runtime import callstats, rights, transport, wire
from topo.runtime.auth import ServerAuth, secure_server, zmq_context
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
from topo.runtime.errors import MessageTooLarge, NodeBusy, UnknownMethod, encode_exception
from topo.runtime.node_state import STATE_METHOD, StateDoor, state_proof
from topo.runtime.pause import forget_gate
from topo.runtime.pool import BUSY_AFTER_S, LeaderPool
from topo.runtime.stuck import OnBusy

log = logging.getLogger("topo.runtime.server")
_LINGER_MS = 200  # how long a closing server keeps sending queued replies
# run is the node's loop; capture_state is a snapshot's hook (topo.runtime.node_state),
# whose answer is a function: neither is a method peers call.
NOT_SERVED = frozenset({"run", "capture_state"})


def public_methods(obj: Any) -> dict[str, Callable[..., Any]]:
    """The methods a node serves: the public callables of ``dir(obj)`` (not NOT_SERVED) and
    ``__call__``. ``dir`` of the instance, as Launchpad does: a wrapper's ``__dir__`` can
    expose the methods of the object it wraps (Acme's checkpointing runners do). A
    property whose value is callable is served as that value, read once here, as
    Launchpad binds it (Acme's inference server serves its batched ``handler`` so)."""
    methods: dict[str, Callable[..., Any]] = {}
    cls = type(obj)
    try:
        names = dir(obj)
    except Exception:  # a broken __dir__: fall back to the class's names
        names = dir(cls)
    for name in names:
        if not isinstance(name, str) or name.startswith("_") or name in NOT_SERVED:
            continue
        try:
            attr = getattr(obj, name, None)
        except Exception:
            continue
        if callable(attr):
            methods[name] = attr
    if "__call__" in dir(cls) and not isinstance(obj, type) and not inspect.isfunction(obj):
        methods["__call__"] = obj.__call__
    return methods


def _member_of(frames: list[Any] | None) -> str:
    """The member name the ZAP handler gave the connection a call came on ("": a call
    of a batch frame, whose frames are not at hand)."""
    if frames is None or len(frames) < 2:
        return ""
    try:
        return str(frames[1].get("User-Id") or "")
    except (AttributeError, zmq.ZMQError):
        return ""


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
        on_busy: OnBusy | None = None,
        busy_after_s: float = BUSY_AFTER_S,
        auth: ServerAuth | None = None,
        identify: bool = False,
    ) -> None:
        """``auth``: who may connect (default: the holders of the node's token);
        ``identify``: methods learn the caller's member name from ``rights.caller()``."""
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
        self._identify = identify
        self._track = track  # a node of this process (not the registry): counted, listed
        if auth is None:
            token, secret = program.serving(node.id)
            # the launcher's door for snapshots (a node server's, not a gateway's)
            self.methods[STATE_METHOD] = StateDoor(obj, node.id, state_proof(secret))
            auth = ServerAuth(
                rights.zap_domain(program.program_id, node.id),
                rights.node_acceptor(token),
                secret,
                f"node {node.id!r}",
            )
        front, self.endpoint = self._bind_front(
            bind_host or program.bind_host, advertise_host, auth
        )
        self._batchers: dict[str, Batcher] = {}
        self._pool = LeaderPool(
            front,
            self._handle,
            threads=threads,
            name=node.id,
            init=self._enter_scope,
            linger_ms=_LINGER_MS,
            dropped=self.dropped,
            refuse=self._refuse,
            on_busy=on_busy,
            busy_after_s=busy_after_s,
            aside=frozenset({STATE_METHOD}),
        )
        for name, fn in self.methods.items():
            spec = batch_spec(fn)
            if spec is not None:
                self._batchers[name] = Batcher(
                    fn, spec, self._batch_reply, f"{node.id}.{name}", init=self._enter_scope
                )
        if track:
            add_process_node(node)
        if register:
            program.address_book.register(node.id, self.endpoint, max_message_bytes)

    @property
    def _workers(self) -> list[threading.Thread]:
        """The handler threads started so far."""
        return self._pool.workers

    # -- set-up ---------------------------------------------------------------
    def _bind_front(
        self, host: str, advertise_host: str | None, auth: ServerAuth
    ) -> tuple[zmq.Socket, str]:
        """The authenticated ROUTER clients connect to (an ipc path on one host, else a
        random tcp port), and the endpoint peers dial."""
        front = zmq_context().socket(zmq.ROUTER)
        front.linger = 0
        # zmq drops a connection that sends a larger frame; never below the size of a
        # batch frame (smaller limits are checked per call in _handle).
        front.maxmsgsize = max(self.max_message_bytes, wire.MIN_FRAME_LIMIT)
        front.sndhwm = 0  # a ROUTER drops replies at HWM; clients bound what is in flight
        transport.check_mechanism(self.program.mechanism, self.program.ipc_dir)
        secure_server(front, self.program.mechanism, auth)
        endpoint = transport.bind(
            front, ipc_dir=self.program.ipc_dir, bind_host=host, advertise_host=advertise_host
        )
        return front, endpoint

    def _enter_scope(self) -> None:
        enter_node_scope(self.program, self.node)

    # -- request handling -------------------------------------------------------
    def _handle(
        self, ident: Any, msg: wire.Message, frames: list[Any] | None
    ) -> tuple[Any, list[Any]] | None:
        """Run one call; the reply to send (routing id, frames), or None.

        ``frames`` are the received frames (None for a call that came in a batch frame,
        which zmq's frame limit has bounded already)."""
        if msg.kind != wire.K_CALL:
            self.dropped(f"not a request (message kind {msg.kind})")
            return None
        call_id = msg.call_id
        if frames is not None and (
            len(frames) > 2 or self.max_message_bytes < wire.MIN_FRAME_LIMIT
        ):
            # (a one-frame request is under zmq's frame limit already; topo's clients
            # check the limit before they send, so this is another client's request)
            size = wire.frames_nbytes(frames) - len(frames[0])  # not the routing id
            if size > self.max_message_bytes:
                self.dropped(f"message of {size} bytes exceeds limit {self.max_message_bytes}")
                too_large = MessageTooLarge(self.node.id, msg.method, size, self.max_message_bytes)
                return ident, self._reply_frames(
                    wire.K_ERROR, call_id, encode_exception(too_large, self.node.id)
                )
        method = msg.method
        fn = self.methods.get(method)
        if fn is None:
            error = UnknownMethod(self.node.id, method, self._method_names)
            return ident, self._reply_frames(
                wire.K_ERROR, call_id, encode_exception(error, self.node.id)
            )
        try:
            args, kwargs = wire.loads(msg.payload, msg.buffers)
            if not isinstance(args, tuple) or not isinstance(kwargs, dict):
                raise TypeError("payload is not (args, kwargs)")
        except Exception as exc:
            self.dropped(f"undecodable payload for {method!r}: {exc!r}")
            return ident, self._reply_frames(wire.K_FAULT, call_id, f"undecodable request: {exc!r}")
        batcher = self._batchers.get(method)
        if batcher is not None:
            batcher.submit((ident, call_id, method, time.perf_counter()), args, kwargs)
            return None
        caller = rights.set_caller(_member_of(frames)) if self._identify else None
        start = time.perf_counter()
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            self._count(method, start, False)
            return ident, self._reply_frames(
                wire.K_ERROR, call_id, encode_exception(exc, self.node.id)
            )
        finally:
            if caller is not None:
                rights.reset_caller(caller)
        self._count(method, start, True)
        return ident, self._reply_frames(wire.K_OK, call_id, result)

    def _count(self, method: str, start: float, ok: bool) -> None:
        """One call served, for the node's call figures (a node's, not the registry's;
        not topo's own state door)."""
        if self._track and method != STATE_METHOD:
            seconds = time.perf_counter() - start
            callstats.served(self.program, self.node.id, method, seconds, ok)

    def _refuse(self, msg: wire.Message, busy_s: float, held: str) -> list[Any] | None:
        """The reply to a call that waited near its deadline while every thread was busy."""
        if msg.kind != wire.K_CALL:
            return None
        error = NodeBusy(self.node.id, msg.method, self.threads, busy_s, held)
        return self._reply_frames(wire.K_ERROR, msg.call_id, encode_exception(error, self.node.id))

    @property
    def busy(self) -> dict[str, Any] | None:
        """The busy report while every handler thread has been busy for a while, else
        None (see ``pool.py``)."""
        return self._pool.flagged

    def _reply_frames(self, kind: int, call_id: int, value: Any) -> list[Any]:
        try:
            return wire.reply_frames(kind, call_id, value)
        except Exception as exc:  # e.g. an unpicklable result
            try:
                return wire.reply_frames(wire.K_ERROR, call_id, encode_exception(exc, self.node.id))
            except Exception:
                return wire.reply_frames(wire.K_FAULT, call_id, f"unpicklable reply: {exc!r}")

    def _batch_reply(self, token: Any, ok: bool, value: Any) -> None:
        ident, call_id, method, start = token
        self._count(method, start, ok)
        if ok:
            frames = self._reply_frames(wire.K_OK, call_id, value)
        else:
            frames = self._reply_frames(
                wire.K_ERROR, call_id, encode_exception(value, self.node.id)
            )
        self._pool.post(ident, frames)

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
        # Handler threads finish the request in hand and send its reply.
        self._pool.close(timeout)
        for b in self._batchers.values():
            b.close()
        if self._track:
            remove_process_node(self.node.id)
            callstats.forget(self.node.id)
        forget_gate(self.node.id)

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
    on_busy: OnBusy | None = None,
    busy_after_s: float = BUSY_AFTER_S,
) -> NodeServer:
    """Start serving ``obj`` as node ``node_id`` and register it in the address book.
    ``on_busy`` is told when every handler thread has been busy for ``busy_after_s``."""
    return NodeServer(
        obj,
        NodeInfo(node_id, group or node_id, replica),
        program or current_program(),
        threads=threads,
        max_message_bytes=max_message_bytes,
        register=register,
        bind_host=bind_host,
        advertise_host=advertise_host,
        on_busy=on_busy,
        busy_after_s=busy_after_s,
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
    busy_after_s: float = BUSY_AFTER_S,
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
        busy_after_s=busy_after_s,
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
