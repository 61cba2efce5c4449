"""Exceptions raised by topo RPC, and how a remote exception crosses the wire.

A remote exception travels as a small dict (type path, args, message,
traceback text, node id) rather than as a pickled exception object, so a
caller never needs the remote type to be importable to learn what happened.
"""

from __future__ import annotations

import importlib
import traceback
from typing import Any


class TopoRuntimeError(Exception):
    """Base class of every error the topo runtime raises itself."""


class PeerUnavailable(TopoRuntimeError, ConnectionError):
    """A peer node was not reachable before the call's deadline."""

    def __init__(self, node_id: str, waited: float, detail: str = "") -> None:
        self.node_id = node_id
        self.waited = waited
        msg = f"peer node {node_id!r} unavailable: waited {waited:.2f}s for it"
        super().__init__(f"{msg} ({detail})" if detail else msg)


class DeadlineExceeded(TopoRuntimeError, TimeoutError):
    """A call was delivered to its peer but no reply came before the deadline."""

    def __init__(self, node_id: str, method: str, waited: float) -> None:
        self.node_id = node_id
        self.method = method
        self.waited = waited
        super().__init__(
            f"call {node_id}.{method}(): Deadline Exceeded (no reply within {waited:.2f}s)"
        )


class RemoteError(TopoRuntimeError):
    """A remote exception whose type could not be re-created in the caller."""

    def __init__(
        self, type_name: str, message: str, remote_traceback: str = "", remote_node: str = ""
    ) -> None:
        self.type_name = type_name
        self.message = message
        self.remote_traceback = remote_traceback
        self.remote_node = remote_node
        super().__init__(f"{type_name}: {message}")


class UnknownMethod(TopoRuntimeError, AttributeError):
    """The called method is not served by the peer node."""

    def __init__(self, node_id: str, method: str, methods: list[str]) -> None:
        self.node_id = node_id
        self.method = method
        self.methods = methods
        listing = ", ".join(methods) if methods else "(none)"
        super().__init__(f"node {node_id!r} has no method {method!r}; it serves: {listing}")


class MessageTooLarge(TopoRuntimeError, ValueError):
    """A request larger than its peer's message limit (``rpc.max_message_mb``): refused
    before it is sent, or by the peer, never dropped in silence."""

    def __init__(self, node_id: str, method: str, size: int, limit: int) -> None:
        self.node_id = node_id
        self.method = method
        self.size = size
        self.limit = limit
        super().__init__(
            f"call {node_id}.{method}(): request of {size} bytes exceeds the node's message "
            f"limit of {limit} bytes ({limit / 2**20:g} MiB, its rpc.max_message_mb)"
        )

    def init_args(self) -> tuple[Any, ...]:
        """The arguments that re-create this error (on the caller's side)."""
        return (self.node_id, self.method, self.size, self.limit)


class NodeBusy(TopoRuntimeError):
    """Every handler thread of the peer stayed busy until the call's deadline came near:
    the call was never run. Says which methods hold the threads."""

    def __init__(self, node_id: str, method: str, threads: int, busy_s: float, held: str) -> None:
        self.node_id = node_id
        self.method = method
        self.threads = threads
        self.busy_s = busy_s
        self.held = held
        super().__init__(
            f"call {node_id}.{method}(): not run, node {node_id!r} is busy: all {threads} "
            f"handler threads have been busy for {busy_s:.1f}s (in {held}); see rpc.threads"
        )

    def init_args(self) -> tuple[Any, ...]:
        """The arguments that re-create this error (on the caller's side)."""
        return (self.node_id, self.method, self.threads, self.busy_s, self.held)


class PermissionDenied(TopoRuntimeError, PermissionError):
    """A node (or executable) tried to reach a node it holds no right to call: refused
    by the callee in the handshake, before a byte of the call was read. A node may call
    the nodes its arguments refer to, and those whose handles it was passed in a call."""

    def __init__(self, caller: str, callee: str, detail: str = "") -> None:
        self.caller = caller
        self.callee = callee
        self.detail = detail
        super().__init__(
            detail
            or f"node {callee!r} refused a call from {caller!r}: {caller!r} holds no handle "
            f"to {callee!r} (the topology does not wire it there, and no node passed it one)"
        )

    def init_args(self) -> tuple[Any, ...]:
        """The arguments that re-create this error (on the caller's side)."""
        return (self.caller, self.callee, self.detail)


class ProtocolError(TopoRuntimeError):
    """A peer sent something that is not a valid topo message."""


def encode_exception(exc: BaseException, node_id: str) -> dict[str, Any]:
    """Describe ``exc`` (raised while serving on ``node_id``) as plain data."""
    cls = type(exc)
    if isinstance(exc, UnknownMethod):
        args: tuple[Any, ...] = (exc.node_id, exc.method, exc.methods)
    elif isinstance(exc, MessageTooLarge | NodeBusy | PermissionDenied):
        args = exc.init_args()
    else:
        args = exc.args
    try:  # only plain, picklable args are worth sending
        import pickle

        pickle.dumps(args, protocol=5)
    except Exception:
        args = (str(exc),)
    return {
        "module": cls.__module__,
        "qualname": cls.__qualname__,
        "args": args,
        "message": str(exc),
        "traceback": "".join(traceback.format_exception(exc)),
        "node": node_id,
    }


def _import_type(module: str, qualname: str) -> type[BaseException] | None:
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except Exception:
        return None
    if isinstance(obj, type) and issubclass(obj, BaseException):
        return obj
    return None


def decode_exception(info: dict[str, Any]) -> BaseException:
    """Re-create a remote exception: original type if importable, else RemoteError."""
    node = str(info.get("node", ""))
    tb = str(info.get("traceback", ""))
    message = str(info.get("message", ""))
    type_name = f"{info.get('module', '?')}.{info.get('qualname', '?')}"
    cls = _import_type(str(info.get("module", "")), str(info.get("qualname", "")))
    exc: BaseException | None = None
    if cls is not None:
        try:
            exc = cls(*info.get("args", ()))
        except Exception:
            exc = None
    if exc is None:
        exc = RemoteError(type_name, message, tb, node)
    try:
        exc.remote_traceback = tb  # type: ignore[attr-defined]
        exc.remote_node = node  # type: ignore[attr-defined]
    except Exception:
        pass
    exc.add_note(f"--- raised on topo node {node!r}; remote traceback ---\n{tb.rstrip()}")
    return exc
