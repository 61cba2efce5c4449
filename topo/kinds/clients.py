"""Client factories for references to nodes of kinds that are not served by topo's RPC."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

# What a call on a connection to a server that went away fails with (gRPC's words): the
# request never reached a server, so it is made once more, on the current address.
TRANSPORT_ERRORS = (
    "connection reset",
    "unavailable",
    "socket closed",
    "failed to connect",
    "connection refused",
    "broken pipe",
)


def is_transport_error(exc: BaseException) -> bool:
    """True when ``exc`` says the connection to the server broke (not a refused request)."""
    text = str(exc).lower()
    return any(words in text for words in TRANSPORT_ERRORS)


def local_address(doors: dict[str, Any], handle: Any, node_id: str) -> str:
    """The address a ``reverb.Client`` in this process uses for the reverb node whose
    ``doors()`` these are: its Unix socket on its own host, else this process's entrance
    to its gateway (an abstract Unix socket of ours, tunnelled with the right to call
    the node that ``handle`` carries)."""
    from topo.runtime.handle import program_of, right_of

    gateway = doors.get("gateway")
    program = program_of(handle)
    here = getattr(program, "bind_host", None)
    if not gateway or (doors.get("host") == here and os.path.exists(doors["unix"])):
        return f"unix:{doors['unix']}"
    from topo.runtime.client import present_right
    from topo.runtime.entrance import shared_entrance

    cap = right_of(handle)

    def secure(sock: Any) -> None:
        present_right(sock, program, node_id, cap)

    key = f"{program.program_id}/{node_id}"
    return shared_entrance(secure, key, gateway).address


class ReverbClient:
    """A lazy ``reverb.Client`` for the reverb node ``node_id``: on first use it asks the
    node for its ``doors()`` through a topo Handle (waiting for the node to be ready, up
    to the deadline) and forwards every attribute to the ``reverb.Client`` built from the
    address that works in this process (:func:`local_address`). A call that fails
    because the connection broke (the reverb node restarted) asks the node again and is
    made once more: on the same address the client's channel reconnects, on a new one a
    new client is built. Writers and datasets keep their own connections and reconnect
    by themselves to a replay restarted at its address (it keeps its doors). Pickles
    as its node id, deadline and topo Handle (with the right to call the node), so it
    can travel like a Handle."""

    # Attributes of the object itself: never forwarded to the reverb.Client (an unpickled
    # object looks them up before __setstate__ has set them).
    __slots_like__ = ("_node_id", "_deadline_s", "_handle", "_client", "_lock")

    def __init__(self, node_id: str, deadline_s: float | None = None, handle: Any = None) -> None:
        from topo.runtime import Handle

        self._node_id = node_id
        self._deadline_s = deadline_s
        # Made now, inside the node: it keeps the node's program for threads it starts.
        # Outside a node (a test thread dereferencing a Launchpad handle) the caller
        # passes a topo Handle already connected to the running program.
        self._handle = handle if handle is not None else Handle(node_id, deadline_s)
        self._client: Any = None
        self._lock = threading.Lock()

    @property
    def node_id(self) -> str:
        """The reverb node's id."""
        return self._node_id

    def address(self) -> str:
        """The address of the reverb server for a ``reverb.Client`` (or writer, dataset)
        made in this process, asked from the node: ``unix:PATH`` on its host, else
        ``unix-abstract:NAME`` (this process's entrance to its gateway)."""
        return local_address(dict(self._handle.doors()), self._handle, self._node_id)

    def reconnect(self) -> None:
        """Forget the built client: the next use asks the node for its address again (after
        the reverb node restarted and its gateway took a new port)."""
        with self._lock:
            self._client = None

    def client(self) -> Any:
        """The ``reverb.Client`` (built on first call)."""
        with self._lock:
            if self._client is None:
                import reverb

                self._client = reverb.Client(self.address())
            return self._client

    def follow(self) -> None:
        """After a broken connection: ask the node for its address (waiting until it
        serves again) and build a new client if the address changed."""
        address = self.address()
        with self._lock:
            if self._client is not None and self._client.server_address != address:
                self._client = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in self.__slots_like__:
            raise AttributeError(name)
        attr = getattr(self.client(), name)
        if not callable(attr) or name in ("writer", "trajectory_writer", "sample"):
            return attr  # streams: their errors come later, from the objects they return
        return self._retrying(name)

    def _retrying(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                return getattr(self.client(), name)(*args, **kwargs)
            except Exception as exc:
                if not is_transport_error(exc):
                    raise
            self.follow()
            return getattr(self.client(), name)(*args, **kwargs)

        call.__name__ = name
        return call

    def __getstate__(self) -> dict[str, Any]:
        return {"node_id": self._node_id, "deadline_s": self._deadline_s, "handle": self._handle}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["node_id"], state["deadline_s"], state.get("handle"))  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"ReverbClient({self._node_id!r})"


def reverb_client(node_id: str, deadline_s: float | None = None) -> ReverbClient:
    """What a reference to the reverb node ``node_id`` becomes in a peer: a lazy
    ``reverb.Client`` (see :class:`ReverbClient`)."""
    return ReverbClient(node_id, deadline_s)
