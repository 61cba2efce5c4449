"""Who may call whom: capabilities derived from the program secret, held by the launcher.

Only the launcher holds a run's secret (``Authority``). From it, it derives for each node

* a *token*: whoever presents it may call the node (PLAIN password on one host; across
  hosts, the CURVE client key derived from it). A ``Handle`` carries its node's token,
  so a handle passed in a call passes the right to call with it (a bearer capability);
* a *server key* (CURVE): only the node itself gets the secret half, so a caller knows
  it reaches the real node before it sends anything.

Each executable's process gets a ``Grant``: the tokens and server keys of the nodes it
runs, the tokens of the nodes the IR wires them to (their references) and its own
*member key*, with which the registry knows which executable calls it. Nothing in a
grant lets its holder derive a right it was not given. The launcher, and the user of
``topo.launch``, keep the secret: they can call every node.
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache

import zmq
from zmq.utils import z85

from topo.runtime.auth import Acceptor

LAUNCHER = "launcher"  # the member name of the launcher and of topo.launch's user
REGISTRY_ID = "__registry__"
NO_RIGHT = b"-"  # the PLAIN password of a caller that holds no token for its callee


def _derive(key: bytes, purpose: str, name: str) -> bytes:
    return hmac.new(key, f"{purpose}\0{name}".encode(), hashlib.sha256).digest()


@lru_cache(maxsize=4096)
def client_keypair(cap: str) -> tuple[bytes, bytes]:
    """The CURVE client keypair (public, secret; Z85) of whoever holds ``cap``."""
    secret = z85.encode(_derive(cap.encode(), "curve-client", ""))
    return zmq.curve_public(secret), secret


@lru_cache(maxsize=4096)
def _public(secret_z85: str) -> str:
    return zmq.curve_public(secret_z85.encode()).decode()


@dataclass(frozen=True)
class Grant:
    """What one executable's process holds: its member name and key (for the registry),
    ``serve`` node id -> (token, CURVE server secret) of the nodes it runs, and ``calls``
    node id -> token of the nodes they are wired to."""

    member: str
    key: str
    serve: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    calls: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> str:
        """The grant as JSON text (it travels to a fork server or another host)."""
        return json.dumps(
            {"member": self.member, "key": self.key, "serve": self.serve, "calls": self.calls}
        )

    @classmethod
    def from_json(cls, text: str | bytes | bytearray) -> Grant:
        """The inverse of ``to_json``."""
        d = json.loads(text)
        serve = {str(n): (str(t), str(s)) for n, (t, s) in d["serve"].items()}
        return cls(str(d["member"]), str(d["key"]), serve, dict(d["calls"]))

    def __repr__(self) -> str:  # never print the keys
        return f"Grant({self.member!r}, serves {sorted(self.serve)}, calls {sorted(self.calls)})"


class Authority:
    """The launcher's side: derives every token and key of one run from its secret.
    ``members``: executable id -> the nodes it runs (the registry's rule of who may
    register and report what)."""

    def __init__(
        self, program_id: str, secret: str, members: Mapping[str, Iterable[str]] | None = None
    ) -> None:
        self.program_id = program_id
        self._key = secret.encode()
        self.members = {m: frozenset(nodes) for m, nodes in (members or {}).items()}
        self._tokens: dict[str, str] = {}
        self._by_curve: dict[bytes, str] | None = None

    def set_members(self, members: Mapping[str, Iterable[str]]) -> None:
        """The executables that may join, and their nodes, from now on (``topo apply``
        adds and removes executables while the program runs)."""
        self.members = {m: frozenset(nodes) for m, nodes in members.items()}
        self._by_curve = None

    def token(self, node_id: str) -> str:
        """The right to call ``node_id``."""
        tok = self._tokens.get(node_id)
        if tok is None:
            tok = self._tokens[node_id] = _derive(self._key, "call", node_id).hex()
        return tok

    def server_secret(self, node_id: str) -> str:
        """The CURVE secret key ``node_id`` serves with (Z85)."""
        return z85.encode(_derive(self._key, "serve", node_id)).decode()

    def server_public(self, node_id: str) -> str:
        """The CURVE public key callers of ``node_id`` expect (Z85)."""
        return _public(self.server_secret(node_id))

    def member_key(self, member: str) -> str:
        """The key with which ``member`` (an executable, or the launcher) calls the registry."""
        return _derive(self._key, "member", member).hex()

    def grant(self, member: str, serves: Iterable[str], calls: Iterable[str]) -> Grant:
        """What executable ``member`` gets: keys for the nodes it ``serves``, tokens for
        the nodes it ``calls``."""
        serve = {n: (self.token(n), self.server_secret(n)) for n in serves}
        return Grant(member, self.member_key(member), serve, {n: self.token(n) for n in calls})

    def acts_for(self, member: str, node_id: str) -> bool:
        """Whether ``member`` runs ``node_id`` (the launcher acts for every node)."""
        return member == LAUNCHER or node_id in self.members.get(member, ())

    def member_of(self, mechanism: bytes, creds: list[bytes]) -> str | None:
        """ZAP acceptor of the registry: the member whose key the credentials prove."""
        if mechanism == b"PLAIN" and len(creds) == 2:
            name = creds[0].decode(errors="replace")
            if name != LAUNCHER and name not in self.members:
                return None
            ok = hmac.compare_digest(creds[1], self.member_key(name).encode())
            return name if ok else None
        if mechanism == b"CURVE" and len(creds) == 1:
            if self._by_curve is None:
                names = [LAUNCHER, *self.members]
                self._by_curve = {
                    z85.decode(client_keypair(self.member_key(m))[0]): m for m in names
                }
            return self._by_curve.get(creds[0])
        return None


def zap_domain(program_id: str, node_id: str) -> str:
    """The ZAP domain of ``node_id``'s server (ZAP domains are at most 255 bytes)."""
    domain = f"{program_id}/{node_id}"
    if len(domain.encode()) <= 200:
        return domain
    return f"{program_id}/#{hashlib.sha256(node_id.encode()).hexdigest()}"


def node_acceptor(token: str) -> Acceptor:
    """ZAP acceptor of a node's server: callers that prove ``token``; the caller's member
    name (PLAIN) is returned for logs."""
    password = token.encode()
    curve = z85.decode(client_keypair(token)[0])

    def accept(mechanism: bytes, creds: list[bytes]) -> str | None:
        if mechanism == b"PLAIN" and len(creds) == 2:
            if hmac.compare_digest(creds[1], password):
                return creds[0].decode(errors="replace")
            return None
        if mechanism == b"CURVE" and len(creds) == 1 and hmac.compare_digest(creds[0], curve):
            return "-"
        return None

    return accept


# -- handles made while a node's arguments are resolved get their tokens ------------------
_offered: contextvars.ContextVar[Mapping[str, str] | None] = contextvars.ContextVar(
    "topo_offered", default=None
)


@contextmanager
def offering(calls: Mapping[str, str]) -> Iterator[None]:
    """While the body runs (a node's references become handles), ``Handle(node_id)``
    takes the token ``calls`` has for ``node_id``."""
    reset = _offered.set(calls)
    try:
        yield
    finally:
        _offered.reset(reset)


def offered(node_id: str) -> str | None:
    """The token on offer for ``node_id`` in this thread (see ``offering``), or None."""
    calls = _offered.get()
    return None if calls is None else calls.get(node_id)


# -- the member a server thread is answering (servers that identify their callers) ---------
_caller: contextvars.ContextVar[str] = contextvars.ContextVar("topo_caller", default="")


def set_caller(member: str) -> contextvars.Token[str]:
    """Note the member whose call this thread is running (reset with ``reset_caller``)."""
    return _caller.set(member)


def reset_caller(token: contextvars.Token[str]) -> None:
    """Undo ``set_caller``."""
    _caller.reset(token)


def caller() -> str:
    """The member whose call this thread runs ("" when the server does not say)."""
    return _caller.get()
