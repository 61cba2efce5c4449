"""Program secrets and libzmq ZAP authentication.

One secret per program run (a CURVE secret key in Z85, made by the launcher).
Servers (ROUTER/PUB sockets) require every connecting client to prove it in
the zmq handshake, checked by a ZAP handler thread owned by this module, so a
refused client never gets a single message to the application:

* ``plain``: PLAIN mechanism, password = the secret (loopback only).
* ``curve``: every member of the program uses the keypair derived from the
  secret; the handler accepts only that public key. Traffic is encrypted and
  the client also authenticates the server.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets as _secrets
import threading
from dataclasses import dataclass
from typing import Literal

import zmq
from zmq.utils import z85

log = logging.getLogger("topo.runtime.auth")

ZAP_ENDPOINT = "inproc://zeromq.zap.01"
Mechanism = Literal["plain", "curve"]
PLAIN_USER = b"topo"


def new_secret() -> str:
    """A fresh program secret (a Z85 CURVE secret key, 40 characters)."""
    return zmq.curve_keypair()[1].decode("ascii")


def new_program_id() -> str:
    """A fresh random program id."""
    return "prog-" + _secrets.token_hex(6)


@dataclass(frozen=True)
class Security:
    """What a socket needs to authenticate inside one program."""

    program_id: str
    secret: str
    mechanism: Mechanism = "plain"

    @property
    def public_key(self) -> bytes:
        """Z85 public key derived from the secret (used by ``curve``)."""
        return zmq.curve_public(self.secret.encode("ascii"))


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
    """ZAP (RFC 27) handler: accepts clients that prove a registered program secret."""

    def __init__(self, ctx: zmq.Context) -> None:
        self._domains: dict[bytes, Security] = {}
        self._sock = ctx.socket(zmq.REP)
        self._sock.linger = 0
        self._sock.bind(ZAP_ENDPOINT)
        self.refused = 0
        threading.Thread(target=self._loop, name="topo-zap", daemon=True).start()

    def allow(self, sec: Security) -> None:
        self._domains[sec.program_id.encode()] = sec

    def _check(self, domain: bytes, mechanism: bytes, creds: list[bytes]) -> bool:
        sec = self._domains.get(domain)
        if sec is None:
            return False
        if mechanism == b"PLAIN" and sec.mechanism == "plain" and len(creds) == 2:
            return creds[0] == PLAIN_USER and hmac.compare_digest(
                creds[1], sec.secret.encode("ascii")
            )
        if mechanism == b"CURVE" and sec.mechanism == "curve" and len(creds) == 1:
            return hmac.compare_digest(z85.encode(creds[0]), sec.public_key)
        return False

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
            ok = version == b"1.0" and self._check(domain, mechanism, msg[6:])
            if not ok:
                self.refused += 1
                log.warning(
                    "topo: refused %s connection from %s (domain %r): bad credentials",
                    mechanism.decode(errors="replace"),
                    address.decode(errors="replace"),
                    domain.decode(errors="replace"),
                )
            reply = [
                version,
                request_id,
                b"200" if ok else b"400",
                b"OK" if ok else b"refused",
                b"topo" if ok else b"",
                b"",
            ]
            try:
                self._sock.send_multipart(reply)
            except zmq.ZMQError:
                pass


def secure_server(sock: zmq.Socket, sec: Security) -> None:
    """Make ``sock`` (bound) demand the program secret from every peer."""
    _zap_handler().allow(sec)
    sock.zap_domain = sec.program_id.encode()
    if hasattr(zmq, "ZAP_ENFORCE_DOMAIN"):
        sock.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
    if sec.mechanism == "curve":
        sock.curve_secretkey = sec.secret.encode("ascii")
        sock.curve_publickey = sec.public_key
        sock.curve_server = True
    else:
        sock.plain_server = True


def secure_client(sock: zmq.Socket, sec: Security) -> None:
    """Give ``sock`` (connecting) the credentials of the program."""
    if sec.mechanism == "curve":
        sock.curve_serverkey = sec.public_key
        sock.curve_publickey = sec.public_key
        sock.curve_secretkey = sec.secret.encode("ascii")
    else:
        sock.plain_username = PLAIN_USER
        sock.plain_password = sec.secret.encode("ascii")


def refused_count() -> int:
    """How many handshakes this process's ZAP handler refused (for tests/logs)."""
    return _zap_handler().refused
