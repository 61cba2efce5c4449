"""The concrete Launchpad node types: PyNode, PyClassNode, CourierNode, ReverbNode,
CacherNode and the two colocations."""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from topo.ir.values import import_path_of
from topo.launchpad.nodes.base import Node, NodeHandle


def _seconds(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    raise ValueError(f"{what} must be a positive number of seconds or a timedelta, got {value!r}")


class PyNode(Node):
    """Runs ``function(*args, **kwargs)``; nothing is served."""

    kind = "py"

    def create_handle(self) -> NodeHandle:
        """A handle nothing can call (a ``PyNode`` serves nothing); Launchpad allows it."""
        return NodeHandle(self)


class PyClassNode(PyNode):
    """Builds ``constructor(*args, **kwargs)`` and calls its ``run()``."""


class CourierNode(Node):
    """Builds ``constructor(*args, **kwargs)`` and serves its public methods over RPC;
    its ``run()``, if it has one, is called too."""

    kind = "courier"

    def __init__(
        self,
        constructor: Callable[..., Any],
        *args: Any,
        courier_kwargs: dict[str, Any] | None = None,
        courier_client_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(constructor, *args, **kwargs)
        self._server_kwargs = dict(courier_kwargs or {})
        unknown = set(self._server_kwargs) - {"thread_pool_size", "port"}
        if unknown:
            raise ValueError(
                f"{self.describe()}: courier_kwargs {sorted(unknown)} are not supported "
                "(topo takes thread_pool_size; ports are chosen by the backend)"
            )
        self.set_client_kwargs(**(courier_client_kwargs or {}))

    def set_client_kwargs(self, **kwargs: Any) -> None:
        """``call_timeout``: the deadline of every call to this node."""
        unknown = set(kwargs) - {"call_timeout", "wait_for_ready"}
        if unknown:
            raise ValueError(
                f"{self.describe()}: courier_client_kwargs {sorted(unknown)} are not supported "
                "(topo takes call_timeout)"
            )
        _seconds(kwargs.get("call_timeout"), "call_timeout")
        super().set_client_kwargs(**kwargs)

    @property
    def call_timeout_s(self) -> float | None:
        """The deadline set on this node's clients, seconds."""
        return _seconds(self._client_kwargs.get("call_timeout"), "call_timeout")

    @property
    def thread_pool_size(self) -> int | None:
        """The server's handler threads, when set."""
        size = self._server_kwargs.get("thread_pool_size")
        if size is not None and (not isinstance(size, int) or size < 1):
            raise ValueError(f"{self.describe()}: thread_pool_size must be >= 1, got {size!r}")
        return size


class ReverbHandle(NodeHandle):
    """A handle to a ``ReverbNode``. Passed to a node it becomes a ``reverb.Client`` of
    the server there; ``dereference()`` from a test thread gives one too (topo's
    :class:`~topo.kinds.clients.ReverbClient`: every ``reverb.Client`` attribute, made
    on first use, following the server if it restarts; ``address()`` is the address
    that works in this process)."""

    def dereference(self) -> Any:
        """A ``reverb.Client`` of this node's server in the program launched last."""
        from topo.kinds.clients import ReverbClient

        handle = super().dereference()  # a topo Handle connected to the running program
        return ReverbClient(handle.node_id, None, handle=handle)


class ReverbNode(Node):
    """A Reverb server whose tables come from ``priority_tables_fn()``."""

    kind = "reverb"

    def __init__(
        self,
        priority_tables_fn: Callable[[], Any],
        checkpoint_ctor: Callable[[], Any] | None = None,
        checkpoint_time_delta_minutes: float | None = None,
    ) -> None:
        super().__init__(priority_tables_fn)
        if checkpoint_ctor is not None:
            raise ValueError(
                "ReverbNode(checkpoint_ctor=...) is not supported by topo: set "
                "checkpoint_time_delta_minutes and the checkpoint directory in the YAML "
                "(checkpoint: {dir, every_s})"
            )
        if checkpoint_time_delta_minutes is not None and checkpoint_time_delta_minutes <= 0:
            raise ValueError("Replay checkpoint time delta must be positive when specified.")
        self.checkpoint_minutes = checkpoint_time_delta_minutes

    def create_handle(self) -> NodeHandle:
        """A :class:`ReverbHandle`: a ``reverb.Client`` where it is used."""
        return ReverbHandle(self)

    def kind_fields(self) -> dict[str, Any]:
        """``tables`` by import path when it has one (as YAML names it), else the function."""
        tables = self.constructor
        return {"tables": import_path_of(tables) or tables, "checkpoint": None}


class CacherNode(Node):
    """A cache in front of a node: serves the source's replies, refreshed every
    ``refresh_interval_ms`` and never older than ``stale_after_ms``."""

    kind = "cacher"

    def __init__(
        self,
        source: NodeHandle,
        refresh_interval_ms: int = 1000,
        stale_after_ms: int | None = None,
        worker_manager: Any = None,
    ) -> None:
        if not isinstance(source, NodeHandle):
            raise TypeError(f"CacherNode needs a handle to the cached node, got {source!r}")
        from topo.nodes.cacher import Cacher

        super().__init__(
            Cacher, source=source, refresh_ms=refresh_interval_ms, stale_ms=stale_after_ms
        )

    def kind_fields(self) -> dict[str, Any]:
        return dict(self.kwargs)


class MultiThreadingColocation(Node):
    """Nodes run as threads of one process."""

    kind = "colocation"

    def __init__(self, nodes: Sequence[Node], return_on_first_completed: bool = False) -> None:
        super().__init__(_colocation)
        self._nodes: list[Node] = []
        self.return_on_first_completed = return_on_first_completed
        for node in nodes:
            self.add_node(node)

    def add_node(self, node: Node) -> NodeHandle | None:
        """Add one more node to the colocation (a thread colocation inside a thread
        colocation adds its nodes: they all end up threads of one process)."""
        if isinstance(node, MultiThreadingColocation):
            if isinstance(node, MultiProcessingColocation) or isinstance(
                self, MultiProcessingColocation
            ):
                raise ValueError(
                    f"{self.describe()} cannot hold {node.describe()}: topo nests only thread "
                    "colocations (their nodes become threads of one process)"
                )
            for inner in node.nodes:
                self.add_node(inner)
            return None
        if not isinstance(node, Node):
            raise ValueError(f"a colocation holds nodes, got {node!r}")
        self._nodes.append(node)
        return node.create_handle()

    @property
    def nodes(self) -> list[Node]:
        """The colocated nodes."""
        return list(self._nodes)

    def inner_nodes(self) -> list[Node]:
        return list(self._nodes)

    def create_handle(self) -> NodeHandle:
        raise ValueError("a colocation has no handle of its own: use the handles of its nodes")

    def describe(self) -> str:
        return f"{type(self).__name__}([{', '.join(n.describe() for n in self._nodes)}])"


class MultiProcessingColocation(MultiThreadingColocation):
    """Nodes run as processes of one host (placed together)."""

    def __init__(self, nodes: Iterable[Node], num_retries_on_failure: int = 0) -> None:
        super().__init__(list(nodes))
        self.num_retries_on_failure = num_retries_on_failure


def _colocation() -> None:  # pragma: no cover - never called: colocations are unpacked
    raise AssertionError("a colocation node is not run itself")
