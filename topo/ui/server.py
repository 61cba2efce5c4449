"""The dashboard's HTTP server: the standard library's ``ThreadingHTTPServer`` (a thread
per request; a page's live stream holds one), the page and its assets from
``topo/ui/static``, the JSON API (``api``) and the live stream.

The live stream is Server-Sent Events: ``status`` messages with the run and the nodes
that changed (looked for every ``POLL_S``: one ``stat`` of ``status.json``), and
``events`` messages with new lines of ``events.jsonl`` (all of them first, in a message
sent even when there are none, which a page's list starts over from). A browser
reconnects a dropped stream by itself.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import parse_qs, urlsplit

from topo.ui.api import Api, BadRequest
from topo.ui.auth import TOKEN_HEADER, Gate
from topo.ui.reader import EventReader

STATIC = Path(__file__).with_name("static")
ASSETS = {
    "app.js": "text/javascript",
    "graph.js": "text/javascript",
    "charts.js": "text/javascript",
    "panel.js": "text/javascript",
    "curves.js": "text/javascript",
    "style.css": "text/css",
}
POLL_S = 0.05
TOKEN_TEXT = re.compile(r"token=[^\s&'\"]*")
KEEPALIVE_S = 15.0
MAX_BODY = 64 * 1024
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; "
    "frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class Dashboard(ThreadingHTTPServer):
    """One run's dashboard: its API, its gate (token, cookie, hosts), its access log."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], api: Api, token: str, log: TextIO | None) -> None:
        super().__init__(address, Handler)
        self.api = api
        self.gate = Gate(token, self.server_address[1], address[0])
        self.access_log = log
        self.log_lock = threading.Lock()
        self.stopping = threading.Event()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser that went away mid-answer (a page closed or reloaded) is no error worth
        a traceback in the log; anything else is, as the standard library prints it."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)

    def close(self) -> None:
        """Stop serving (live streams end at their next look) and release the port."""
        self.stopping.set()
        self.shutdown()
        self.server_close()

    def close_log(self) -> None:
        """Close the access log; requests still being answered are no longer logged."""
        with self.log_lock:
            log, self.access_log = self.access_log, None
        if log is not None:
            log.close()


class Handler(BaseHTTPRequestHandler):
    """One request."""

    server: Dashboard
    protocol_version = "HTTP/1.1"

    # -- plumbing ---------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:
        """The access log: time, method, path without its query, status; anything else
        the server logs (a malformed request's line) with any token cut out."""
        self._log(TOKEN_TEXT.sub("token=…", format % args))

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        """One line per request in the access log."""
        path = urlsplit(self.path).path if hasattr(self, "path") else "-"
        self._log(f"{self.command} {path} {int(code) if str(code).isdigit() else code}")

    def _log(self, text: str) -> None:
        with self.server.log_lock:
            log = self.server.access_log
            if log is None:  # none, or closed: a request answered as the dashboard ends
                return
            log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {text}\n")
            log.flush()

    def _send(
        self, status: int, body: bytes, kind: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for k, v in {**SECURITY_HEADERS, **(extra or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, value: Any, status: int = 200) -> None:
        body = json.dumps(value, default=str, separators=(",", ":")).encode()
        self._send(status, body, "application/json")

    def _error(self, status: int, message: str) -> None:
        self._json({"ok": False, "error": message}, status)

    def _gate(self) -> bool:
        """The host and token checks of every request; False when it was refused."""
        gate = self.server.gate
        if not gate.host_ok(self.headers.get("Host")):
            self._error(HTTPStatus.FORBIDDEN, "this dashboard answers only its own address")
            return False
        if not gate.allowed(self.path, self.headers.get("Cookie")):
            self._error(
                HTTPStatus.FORBIDDEN,
                "no valid token: open the URL that `topo ui` printed (it holds ?token=...)",
            )
            return False
        return True

    # -- GET ----------------------------------------------------------------------------
    def do_GET(self) -> None:
        """The page, its assets, the API's answers and the live stream."""
        if urlsplit(self.path).path == "/favicon.ico":  # browsers ask: nothing to give
            self._send(HTTPStatus.NO_CONTENT, b"", "text/plain")
            return
        if not self._gate():
            return
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        gate = self.server.gate
        if "token" in query and url.path == "/":  # first visit: a cookie, a clean address
            self._send(
                HTTPStatus.SEE_OTHER,
                b"",
                "text/plain",
                {"Location": "/", "Set-Cookie": gate.set_cookie()},
            )
            return
        try:
            self._route(url.path, query)
        except BadRequest as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))
        except (BrokenPipeError, ConnectionResetError):
            pass

    def do_HEAD(self) -> None:
        self.do_GET()

    def _route(self, path: str, q: dict[str, str]) -> None:
        api = self.server.api
        if path in ("/", "/index.html"):
            page = (STATIC / "index.html").read_text(encoding="utf-8")
            page = page.replace("{{TOKEN}}", self.server.gate.token)
            self._send(200, page.encode(), "text/html; charset=utf-8")
        elif path.startswith("/static/") and path[8:] in ASSETS:
            name = path[8:]
            self._send(200, (STATIC / name).read_bytes(), f"{ASSETS[name]}; charset=utf-8")
        elif path == "/api/run":
            self._json(api.run())
        elif path == "/api/graph":
            self._json(api.graph(q.get("expand", "")))
        elif path == "/api/stream":
            self._stream()
        elif path == "/api/logs":
            args = (q.get(k, "") for k in ("node", "offset", "search", "tail"))
            self._json(api.logs(*args))
        elif path == "/api/metrics":
            self._json(api.metrics(q.get("run", ""), q.get("offsets", "")))
        elif path == "/api/runs":
            self._json(api.runs())
        elif path == "/api/process":
            self._json(api.process(q.get("node", "")))
        else:
            self._error(HTTPStatus.NOT_FOUND, f"nothing at {path}")

    # -- POST: actions -------------------------------------------------------------------
    def do_POST(self) -> None:
        """An action (stop, restart, snapshot), confirmed and with the token's header."""
        if not self._gate():
            return
        if urlsplit(self.path).path != "/api/action":
            self._error(HTTPStatus.NOT_FOUND, "actions are posted to /api/action")
            return
        gate = self.server.gate
        if not gate.action_allowed(self.headers.get(TOKEN_HEADER), self.headers.get("Cookie")):
            self._error(HTTPStatus.FORBIDDEN, f"an action needs the token in {TOKEN_HEADER}")
            return
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if not 0 < length <= MAX_BODY:
            self._error(HTTPStatus.BAD_REQUEST, "an action is a small JSON object")
            return
        try:
            body = json.loads(self.rfile.read(length))
            self._json(self.server.api.act(body))
        except ValueError:
            self._error(HTTPStatus.BAD_REQUEST, "an action is a JSON object")
        except BadRequest as exc:
            self._error(HTTPStatus.BAD_REQUEST, str(exc))

    # -- the live stream -----------------------------------------------------------------
    def _stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        for k, v in SECURITY_HEADERS.items():
            self.send_header(k, v)
        self.end_headers()
        self.close_connection = True
        reader = self.server.api.reader
        events = EventReader(reader.run_dir)
        sent: dict[str, dict[str, Any]] = {}
        version = -1
        quiet_since = time.monotonic()
        first: list[dict[str, Any]] | None = events.first()
        try:
            while not self.server.stopping.is_set():
                snap = reader.status()
                if snap.version != version:
                    version = snap.version
                    changed = [n for k, n in snap.nodes.items() if sent.get(k) != n]
                    gone = [k for k in sent if k not in snap.nodes]  # removed by topo apply
                    sent = dict(snap.nodes)
                    message = {"state": snap.state, "version": version, "run": snap.run}
                    message.update(nodes=changed, gone=gone, actions=snap.control is not None)
                    self._event("status", message)
                    quiet_since = time.monotonic()
                new = first if first is not None else events.more()
                # the first batch goes even when empty: a page starts its list over from it
                if new or first is not None:
                    self._event("events", new)
                    quiet_since = time.monotonic()
                first = None
                if time.monotonic() - quiet_since > KEEPALIVE_S:
                    self.wfile.write(b": keep-alive\n\n")
                    self.wfile.flush()
                    quiet_since = time.monotonic()
                self.server.stopping.wait(POLL_S)
        except (BrokenPipeError, ConnectionResetError, OSError):
            return

    def _event(self, name: str, data: Any) -> None:
        text = json.dumps(data, default=str, separators=(",", ":"))
        self.wfile.write(f"event: {name}\ndata: {text}\n\n".encode())
        self.wfile.flush()
