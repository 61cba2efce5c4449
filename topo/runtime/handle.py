"""Handles: what a reference to another node becomes inside a running node.

``h.method(*a, **kw)`` blocks; ``h.futures.method(...)`` returns a
``concurrent.futures.Future``. A handle carries the peer's node id, an optional
per-group deadline and its *token*, the right to call the peer (``rights``): it
pickles to any process of the program with that right (a handle passed in a call
lets the receiver call its node) and connects lazily there. A handle made without a
token -- not from a node's arguments, not received in a call -- is refused by its
node, unless the process holds the program secret (the launcher, ``topo.launch``).
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from topo.runtime import client, futures
from topo.runtime.context import ProgramContext, current_program, maybe_current_program
from topo.runtime.rights import offered


class Handle:
    """Client-side proxy of node ``node_id``. A handle made inside a node (its arguments
    are) keeps that node's program, so threads the node starts itself can use it too."""

    # ``__dict__`` caches the per-method callables: ``h.method`` is then a plain lookup,
    # not a failed one followed by ``__getattr__`` (microseconds on every call).
    __slots__ = ("__dict__", "_cap", "_node_id", "_program", "_timeout")

    def __init__(
        self,
        node_id: str,
        timeout: float | None = None,
        program: ProgramContext | None = None,
        cap: str | None = None,
    ) -> None:
        self._node_id = node_id
        self._timeout = timeout
        self._program = program if program is not None else maybe_current_program()
        # Made while a node's references are resolved: the token its grant has for them.
        self._cap = cap if cap is not None else offered(node_id)

    @property
    def node_id(self) -> str:
        """The peer's node id."""
        return self._node_id

    def with_timeout(self, seconds: float) -> Handle:
        """A copy of this handle whose calls use a ``seconds`` deadline."""
        return Handle(self._node_id, seconds, self._program, self._cap)

    def _resolve(self) -> tuple[ProgramContext, float, str | None]:
        program = self._program or current_program()
        timeout = self._timeout if self._timeout is not None else program.default_deadline
        cap = self._cap
        return program, timeout, cap if cap is not None else program.mint(self._node_id)

    def call(self, method: str, /, *args: Any, **kwargs: Any) -> Any:
        """Blocking call of ``method`` on the peer."""
        program, timeout, cap = self._resolve()
        return client.call(program, self._node_id, method, args, kwargs, timeout, cap)

    def submit(self, method: str, /, *args: Any, **kwargs: Any) -> Future:
        """Non-blocking call of ``method``; returns a Future of its result."""
        program, timeout, cap = self._resolve()
        return futures.engine().submit(program, self._node_id, method, args, kwargs, timeout, cap)

    @property
    def futures(self) -> _Futures:
        """``h.futures.method(...)`` returns a Future instead of blocking."""
        cached = self.__dict__.get(" futures")
        if cached is None:
            cached = self.__dict__[" futures"] = _Futures(self)
        return cached

    def __getattr__(self, name: str) -> _Method:
        if name.startswith("__"):
            raise AttributeError(name)
        method = self.__dict__[name] = _Method(self, name)
        return method

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.call("__call__", *args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        # The right travels with the handle: whoever unpickles it may call the node.
        cap = self._cap
        if cap is None and self._program is not None:
            cap = self._program.mint(self._node_id)
        return (Handle, (self._node_id, self._timeout, None, cap))

    def __repr__(self) -> str:
        return f"Handle({self._node_id!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Handle) and other._node_id == self._node_id

    def __hash__(self) -> int:
        return hash(("topo.Handle", self._node_id))


class _Method:
    __slots__ = ("_handle", "_name")

    def __init__(self, handle: Handle, name: str) -> None:
        self._handle = handle
        self._name = name

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._handle.call(self._name, *args, **kwargs)


class _Futures:
    __slots__ = ("__dict__", "_handle")

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name != "__call__":
            raise AttributeError(name)
        handle = self._handle

        def submit(*args: Any, **kwargs: Any) -> Future:
            return handle.submit(name, *args, **kwargs)

        self.__dict__[name] = submit
        return submit

    def __call__(self, *args: Any, **kwargs: Any) -> Future:
        return self._handle.submit("__call__", *args, **kwargs)


def handles(node_ids: Iterable[str], timeout: float | None = None) -> list[Handle]:
    """Handles for a group reference (one per node, in order)."""
    return [Handle(n, timeout) for n in node_ids]


def program_of(handle: Handle) -> ProgramContext:
    """The program ``handle`` calls into (its node's, else this thread's). A function,
    not a method: every attribute of a handle names a method of its node."""
    return handle._program or current_program()


def right_of(handle: Handle) -> str | None:
    """The token ``handle`` presents to its node (None: it holds no right)."""
    cap = handle._cap
    return cap if cap is not None else program_of(handle).mint(handle._node_id)
