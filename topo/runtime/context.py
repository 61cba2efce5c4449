"""Runtime context: the program a process belongs to, and the node a thread runs.

``ProgramContext`` is per process (one program); ``NodeInfo`` is per thread
(a contextvar), so nodes colocated as threads in one process each see their
own ``topo.current_node()``. Threads a node starts itself fall back to the
process's only node when there is exactly one.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from topo.runtime.addressbook import AddressBook, InProcessAddressBook
from topo.runtime.auth import Mechanism, new_program_id, new_secret
from topo.runtime.errors import PermissionDenied
from topo.runtime.rights import LAUNCHER, REGISTRY_ID, Authority, Grant

DEFAULT_DEADLINE = 60.0
DEFAULT_MAX_MESSAGE_BYTES = 1 << 30


@dataclass(frozen=True)
class NodeInfo:
    """Identity of a running node: id, group and replica index."""

    id: str
    group: str
    replica: int = 0


@dataclass
class ProgramContext:
    """Everything a process needs to take part in one program run.

    With the program ``secret`` (the launcher, ``topo.launch``'s user, tests) it may call
    every node; a node's process has ``secret`` empty and holds only its executable's
    ``grant`` (see ``rights``)."""

    program_id: str
    secret: str = field(repr=False)  # (never in a repr: tracebacks show locals)
    address_book: AddressBook
    default_deadline: float = DEFAULT_DEADLINE
    mechanism: Mechanism = "plain"
    bind_host: str = "127.0.0.1"
    ipc_dir: str | None = None  # servers bind ipc sockets here (one host); None: tcp + CURVE
    grant: Grant | None = None
    registry_key: str = ""  # the registry's CURVE public key (Z85)
    authority: Authority | None = field(init=False, default=None, repr=False)

    def __post_init__(self) -> None:
        if self.secret:
            self.authority = Authority(self.program_id, self.secret)
            if not self.registry_key:
                self.registry_key = self.authority.server_public(REGISTRY_ID)
        elif self.grant is None:
            raise ValueError("a program member needs the program secret or a grant")

    @property
    def member(self) -> str:
        """Who this process is to the registry: its executable, or the launcher."""
        return LAUNCHER if self.grant is None else self.grant.member

    @property
    def member_key(self) -> str:
        """The key this process calls the registry with."""
        if self.grant is not None:
            return self.grant.key
        assert self.authority is not None
        return self.authority.member_key(LAUNCHER)

    def mint(self, node_id: str) -> str | None:
        """The token to call ``node_id``, for a process that holds the secret (else None:
        a node's process only has the tokens it was given)."""
        authority = self.authority
        return None if authority is None else authority.token(node_id)

    def serving(self, node_id: str) -> tuple[str, str]:
        """(token, CURVE server secret) of ``node_id``, which this process serves."""
        if self.authority is not None:
            return self.authority.token(node_id), self.authority.server_secret(node_id)
        assert self.grant is not None
        keys = self.grant.serve.get(node_id)
        if keys is None:
            raise PermissionDenied(
                self.grant.member,
                node_id,
                f"executable {self.grant.member!r} may not serve node {node_id!r}: it was "
                f"given the keys of {', '.join(sorted(self.grant.serve)) or 'no node'} only",
            )
        return keys

    def server_key(self, node_id: str) -> str:
        """The CURVE public key ``node_id``'s server proves (from the secret, else asked
        of the registry)."""
        if node_id == REGISTRY_ID:
            return self.registry_key
        if self.authority is not None:
            return self.authority.server_public(node_id)
        key = self.address_book.server_key(node_id)
        if not key:
            raise PermissionDenied(self.member, node_id, f"no server key known for {node_id!r}")
        return key

    @property
    def stop_event(self) -> threading.Event:
        """Set once the program is stopping."""
        return self.address_book.stop_event

    @classmethod
    def local(cls, default_deadline: float = DEFAULT_DEADLINE) -> ProgramContext:
        """A fresh in-process program (threads backend, tests), with its own socket dir."""
        from topo.runtime.transport import make_ipc_dir

        return cls(
            new_program_id(),
            new_secret(),
            InProcessAddressBook(),
            default_deadline=default_deadline,
            ipc_dir=make_ipc_dir(),
        )


_program_var: contextvars.ContextVar[ProgramContext | None] = contextvars.ContextVar(
    "topo_program", default=None
)
_node_var: contextvars.ContextVar[NodeInfo | None] = contextvars.ContextVar(
    "topo_node", default=None
)
_process_program: ProgramContext | None = None
_process_nodes: dict[str, NodeInfo] = {}
_lock = threading.Lock()


def set_process_program(program: ProgramContext | None) -> None:
    """Make ``program`` the default program of every thread of this process."""
    global _process_program
    _process_program = program


def current_program() -> ProgramContext:
    """The program of the calling thread (its node's, else the process default)."""
    program = _program_var.get() or _process_program
    if program is None:
        raise RuntimeError(
            "no topo program is running in this process (is this code running inside a topo node?)"
        )
    return program


def maybe_current_program() -> ProgramContext | None:
    """Like ``current_program`` but None outside a program."""
    return _program_var.get() or _process_program


def current_node_info() -> NodeInfo | None:
    """The node of the calling thread, or the process's only node, or None."""
    node = _node_var.get()
    if node is not None:
        return node
    with _lock:
        if len(_process_nodes) == 1:
            return next(iter(_process_nodes.values()))
    return None


@contextmanager
def node_scope(program: ProgramContext, node: NodeInfo | None) -> Iterator[None]:
    """Run the body as ``node`` of ``program`` (for this thread only)."""
    t1 = _program_var.set(program)
    t2 = _node_var.set(node)
    try:
        yield
    finally:
        _node_var.reset(t2)
        _program_var.reset(t1)


def enter_node_scope(program: ProgramContext, node: NodeInfo | None) -> None:
    """Bind the calling thread (for good) to ``node`` of ``program``."""
    _program_var.set(program)
    _node_var.set(node)


def add_process_node(node: NodeInfo) -> None:
    """Record that ``node`` runs in this process (fallback for its own threads)."""
    with _lock:
        _process_nodes[node.id] = node


def remove_process_node(node_id: str) -> None:
    """Forget a node that stopped running in this process."""
    with _lock:
        _process_nodes.pop(node_id, None)
