"""Program secrets and libzmq ZAP authentication.

One secret per program run (made by the launcher, kept by it: see ``rights``). Servers
(ROUTER/PUB sockets) require every connecting client to prove a right in the zmq
handshake, checked by this process's ZAP handler thread against the server's
``ServerAuth``, so a refused client never gets a single message to the application:

* ``plain``: PLAIN mechanism, password = the caller's token (ipc in a private directory).
* ``curve``: the server has its own keypair; the client's keypair is derived from its
  token, and the server accepts only the public key its token gives. Traffic is
  encrypted and the client also authenticates the server.

A refused client is told in the handshake (ZAP status 400): its socket monitor sees
``HANDSHAKE_FAILED_AUTH`` at once, so callers learn of a refusal without waiting out
their deadline (``client``).
"""

from __future__ import annotations

import logging
import os
import secrets as _secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import zmq

log = logging.getLogger("topo.runtime.auth")

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
Mechanism = Literal["plain", "curve"]


def new_secret() -> str:
    """A fresh program secret (a Z85 CURVE secret key, 40 characters)."""
    return zmq.curve_keypair()[1].decode("ascii")


def new_program_id() -> str:
    """A fresh random program id."""
    return "prog-" + _secrets.token_hex(6)


# A ZAP acceptor: (mechanism, credentials) -> the caller's name, or None to refuse.
Acceptor = Callable[[bytes, list[bytes]], "str | None"]
_LOGGED_REFUSALS = 10  # per server: the first refusals are logged, then every 1000th


@dataclass(frozen=True)
class ServerAuth:
    """How one server socket authenticates its clients: ``domain`` (its ZAP domain),
    ``accept`` (who may connect), ``secret`` (its CURVE secret key, Z85; None for
    PLAIN) and ``label`` (its name in logs)."""

    domain: str
    accept: Acceptor
    secret: str | None
    label: str


_ctx_lock = threading.Lock()
_ctx: zmq.Context | None = None
_ctx_pid = -1
_zap: _ZapHandler | None = None


def zmq_context() -> zmq.Context:
    """This process's zmq context (re-created after fork), with its ZAP handler."""
    global _ctx, _ctx_pid, _zap
    pid = os.getpid()
    if _ctx is not None and _ctx_pid == pid:
        return _ctx
    with _ctx_lock:
        if _ctx is None or _ctx_pid != pid:
            ctx = zmq.Context()
            ctx.setsockopt(zmq.LINGER, 0)
            _zap = _ZapHandler(ctx)
            _ctx, _ctx_pid = ctx, pid
    assert _ctx is not None
    return _ctx


def _zap_handler() -> _ZapHandler:
    zmq_context()
    assert _zap is not None
    return _zap


class _ZapHandler:
    """ZAP (RFC 27) handler: asks each server's acceptor whether a client may connect."""

    def __init__(self, ctx: zmq.Context) -> None:
        self._domains: dict[bytes, ServerAuth] = {}
        self._refusals: dict[bytes, int] = {}
        self._sock = ctx.socket(zmq.REP)
        self._sock.linger = 0
        self._sock.bind(ZAP_ENDPOINT)
        self.refused = 0
        threading.Thread(target=self._loop, name="topo-zap", daemon=True).start()

    def allow(self, auth: ServerAuth) -> None:
        self._domains[auth.domain.encode()] = auth

    def _check(self, domain: bytes, mechanism: bytes, creds: list[bytes]) -> str | None:
        auth = self._domains.get(domain)
        if auth is None:
            return None
        try:
            return auth.accept(mechanism, creds)
        except Exception:  # a bug in an acceptor refuses: never let a client through
            log.exception("topo: ZAP check of %s failed", auth.label)
            return None

    def _refused(self, domain: bytes, mechanism: bytes, address: bytes, creds: list[bytes]) -> None:
        self.refused += 1
        n = self._refusals[domain] = self._refusals.get(domain, 0) + 1
        if n > _LOGGED_REFUSALS and n % 1000:
            return
        auth = self._domains.get(domain)
        who = creds[0].decode(errors="replace") if mechanism == b"PLAIN" and creds else ""
        log.warning(
            "topo: %s refused a %s connection from %s%s: it proved no right to call it (#%d)",
            auth.label if auth is not None else f"unknown domain {domain!r}",
            mechanism.decode(errors="replace"),
            f"{who!r} at " if who else "",
            address.decode(errors="replace"),
            n,
        )

    def _loop(self) -> None:
        while True:
            try:
                msg = self._sock.recv_multipart()
            except zmq.ContextTerminated:
                return
            except zmq.ZMQError:
                continue
            if len(msg) < 6:
                continue
            version, request_id, domain, address, _identity, mechanism = msg[:6]
            user = self._check(domain, mechanism, msg[6:]) if version == b"1.0" else None
            if user is None:
                self._refused(domain, mechanism, address, msg[6:])
            reply = [
                version,
                request_id,
                b"200" if user is not None else b"400",
                b"OK" if user is not None else b"no right to call this node",
                (user or "").encode(),
                b"",
            ]
            try:
                self._sock.send_multipart(reply)
            except zmq.ZMQError:
                pass


def secure_server(sock: zmq.Socket, mechanism: Mechanism, auth: ServerAuth) -> None:
    """Make ``sock`` (before it binds) demand what ``auth`` accepts from every peer."""
    _zap_handler().allow(auth)
    sock.zap_domain = auth.domain.encode()
    if hasattr(zmq, "ZAP_ENFORCE_DOMAIN"):
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
    if mechanism == "curve":
        assert auth.secret is not None, "a CURVE server needs its secret key"
        secret = auth.secret.encode("ascii")
        sock.curve_secretkey = secret
        sock.curve_publickey = zmq.curve_public(secret)
        sock.curve_server = True
    else:
        sock.plain_server = True


def secure_client(
    sock: zmq.Socket,
    mechanism: Mechanism,
    name: str,
    password: bytes,
    keypair: tuple[bytes, bytes] | None = None,
    server_key: str | None = None,
) -> None:
    """Give ``sock`` (before it connects) its credentials: PLAIN ``name`` and
    ``password``; CURVE ``keypair`` (public, secret) and the ``server_key`` it expects."""
    if mechanism == "curve":
        if keypair is None:
            keypair = zmq.curve_keypair()  # holds no right: the server refuses it
        if not server_key:
            raise ValueError("a CURVE client needs the public key of its server")
        sock.curve_serverkey = server_key.encode("ascii")
        sock.curve_publickey, sock.curve_secretkey = keypair
    else:
        sock.plain_username = name.encode()[:255] or b"-"
        sock.plain_password = password[:255] or b"-"


def refused_count() -> int:
    """How many handshakes this process's ZAP handler refused (for tests/logs)."""
    return _zap_handler().refused
