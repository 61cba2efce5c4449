"""Who may use the dashboard: whoever holds its token (a random secret shown once, in
the URL that ``topo ui`` prints, as Jupyter does), and nobody else.

* The first visit carries ``?token=...``; the page answers with a cookie (HttpOnly,
  SameSite=Strict, named after the port: cookies do not tell ports apart) and sends the
  browser on to the same address without the token, so it does not stay in the address
  bar or the history.
* Every request needs the cookie or the token (compared in constant time).
* An action (POST) needs the token in the ``X-Topo-Token`` header as well: another
  site's page can make a browser send cookies but cannot set that header.
* While the dashboard listens on loopback, a request naming another ``Host`` is refused
  (a DNS name rebound to 127.0.0.1 by another site).
* The token is never written anywhere: not in the run directory, not in the access log
  (which drops query strings).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs, urlsplit

TOKEN_HEADER = "X-Topo-Token"


def new_token() -> str:
    """A fresh token: 32 random bytes, URL-safe."""
    return secrets.token_urlsafe(32)


def same(given: str | None, token: str) -> bool:
    """Whether ``given`` is the token (constant time)."""
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is this machine's loopback."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class Gate:
    """The checks of one dashboard: its token, the cookie that carries it, the hosts a
    request may name."""

    def __init__(self, token: str, port: int, host: str) -> None:
        self.token = token
        self.cookie_name = f"topo_ui_{port}"
        self.check_host = is_loopback(host)
        self.hosts = {f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]", host)}

    def host_ok(self, header: str | None) -> bool:
        """Whether the ``Host`` a request names is this dashboard (always, when it
        listens beyond loopback: the token is then the only guard)."""
        return not self.check_host or (header or "") in self.hosts

    def query_token(self, path: str) -> str | None:
        """The ``token`` of a request's query string, if it has one."""
        values = parse_qs(urlsplit(path).query).get("token")
        return values[0] if values else None

    def cookie_token(self, header: str | None) -> str | None:
        """The token the request's cookie carries, if any."""
        if not header:
            return None
        try:
            jar = SimpleCookie(header)
        except CookieError:
            return None
        morsel = jar.get(self.cookie_name)
        return morsel.value if morsel is not None else None

    def allowed(self, path: str, cookie: str | None) -> bool:
        """Whether a request (its path with query, its Cookie header) holds the token."""
        return same(self.cookie_token(cookie), self.token) or same(
            self.query_token(path), self.token
        )

    def action_allowed(self, header: str | None, cookie: str | None) -> bool:
        """Whether a POST carries the token in its header (and the cookie, as any
        request)."""
        return same(header, self.token) and same(self.cookie_token(cookie), self.token)

    def set_cookie(self) -> str:
        """The ``Set-Cookie`` value that keeps the token in the browser."""
        return f"{self.cookie_name}={self.token}; HttpOnly; SameSite=Strict; Path=/"
