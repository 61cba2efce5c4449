"""Launchpad's node and handle objects, as a topo program is built from them.

A node holds what builds it (a constructor and its arguments) and nothing about how
it runs: ``topo.launchpad.translate`` turns the nodes of a program into the Program
IR, and topo's backends run that. A handle stands for a node inside the arguments of
another; from a test thread, ``handle.dereference()`` gives a client of the node in
the program launched last.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

_ids = itertools.count()
# How a handle is dereferenced: set by topo.launchpad.launched when a program is
# launched (a node object knows nothing of running programs).
_dereferencer: list[Callable[[Node], Any]] = []


def set_dereferencer(find_client: Callable[[Node], Any]) -> None:
    """Make ``handle.dereference()`` look nodes up with ``find_client``."""
    _dereferencer[:] = [find_client]


class NodeHandle:
    """A reference to a node, to pass to other nodes (Launchpad's ``CourierHandle``).

    Inside a running node it has become a client already; here it can only be passed
    on, or dereferenced from outside the program once the program is launched."""

    def __init__(self, node: Node) -> None:
        self._node = node

    @property
    def node(self) -> Node:
        """The node this handle refers to."""
        return self._node

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"a handle to {self._node.describe()} has no attribute {name!r}: handles become "
            "clients inside the nodes they are passed to; from a test thread, call "
            "handle.dereference() after launch"
        )

    def set_client_kwargs(self, **kwargs: Any) -> None:
        """Launchpad's client options; ``call_timeout`` sets the node's call deadline."""
        self._node.set_client_kwargs(**kwargs)

    def dereference(self) -> Any:
        """A client of this node in the program launched last (from a test thread)."""
        if not _dereferencer:
            raise RuntimeError(
                f"{self._node.describe()} is not part of a launched program: call "
                "lp.launch(program) first, then dereference its handles"
            )
        return _dereferencer[0](self._node)

    def __repr__(self) -> str:
        return f"<handle to {self._node.describe()}>"

    def __reduce__(self) -> Any:
        raise TypeError(
            f"a handle to {self._node.describe()} cannot be pickled: pass it to a node as an "
            "argument (directly, or in a list, tuple or dict) so topo can wire it"
        )


class Node:
    """Base of every Launchpad node: a callable and its arguments, handles among them."""

    kind = "py"  # the topo node kind this becomes

    def __init__(self, constructor: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
        if not callable(constructor):
            raise TypeError(f"{type(self).__name__} needs a callable, got {constructor!r}")
        self.uid = next(_ids)
        self._constructor = constructor
        self._args: tuple[Any, ...] = args
        self._kwargs: dict[str, Any] = kwargs
        self._should_run = True
        self._client_kwargs: dict[str, Any] = {}
        self._server_kwargs: dict[str, Any] = {}

    @property
    def constructor(self) -> Callable[..., Any]:
        """What builds the node's object (or, for a ``PyNode``, the function run)."""
        return self._constructor

    @property
    def args(self) -> tuple[Any, ...]:
        """Positional arguments of the constructor."""
        return self._args

    @property
    def kwargs(self) -> Mapping[str, Any]:
        """Keyword arguments of the constructor."""
        return self._kwargs

    @property
    def should_run(self) -> bool:
        """False after :meth:`disable_run`."""
        return self._should_run

    @property
    def client_kwargs(self) -> Mapping[str, Any]:
        """Options of clients of this node (``call_timeout``)."""
        return self._client_kwargs

    @property
    def server_kwargs(self) -> Mapping[str, Any]:
        """Options of this node's server (``thread_pool_size``)."""
        return self._server_kwargs

    def configure(self, *args: Any, **kwargs: Any) -> None:
        """Replace the constructor's arguments (for nodes that refer to each other)."""
        self._args, self._kwargs = args, kwargs

    def create_handle(self) -> NodeHandle:
        """A handle to this node, to pass to other nodes."""
        return NodeHandle(self)

    def disable_run(self) -> None:
        """Build the object but do not call its ``run()`` (tests step nodes by hand)."""
        self._should_run = False

    def enable_run(self) -> None:
        """Undo :meth:`disable_run`."""
        self._should_run = True

    def set_client_kwargs(self, **kwargs: Any) -> None:
        """Options of clients of this node: ``call_timeout`` (seconds or a timedelta)."""
        self._client_kwargs = dict(kwargs)

    @property
    def input_handles(self) -> list[NodeHandle]:
        """The handles among this node's arguments (nested in lists, tuples and dicts), in
        order: the nodes it talks to, to inspect a program's graph. A new list each time."""
        return list(handles_in((self._args, self._kwargs)))

    @property
    def addresses(self) -> list[Any]:
        """The ``lp.Address`` objects assigned to this node (bound by a local launch)."""
        if "_addresses" not in self.__dict__:
            self._addresses: list[Any] = []
        return self._addresses

    def allocate_address(self, address: Any) -> None:
        """Assign ``address`` to this node (as ``address.assign(node)`` does)."""
        address.assign(self)

    def inner_nodes(self) -> list[Node]:
        """The nodes this one stands for when added to a program (itself)."""
        return [self]

    def kind_fields(self) -> dict[str, Any] | None:
        """For a built-in kind with its own YAML fields (reverb, cacher): their values, which
        the kind turns into its target's arguments as it does for a YAML group; else None."""
        return None

    def describe(self) -> str:
        """``CourierNode(Producer)``: for messages."""
        # A subclass whose __init__ skips Node's has no constructor: still describable.
        constructor = getattr(self, "_constructor", None)
        if constructor is None:
            return type(self).__name__
        name = getattr(constructor, "__qualname__", None) or type(constructor).__name__
        return f"{type(self).__name__}({name})"

    def __repr__(self) -> str:
        return f"<{self.describe()}>"


def handles_in(value: Any) -> Iterator[NodeHandle]:
    """Every handle inside ``value`` (lists, tuples, dicts, nested)."""
    if isinstance(value, NodeHandle):
        yield value
    elif isinstance(value, list | tuple):
        for v in value:
            yield from handles_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from handles_in(v)
