"""The launcher's metrics endpoint (``topo run --metrics-port``): every node's latest
metric figures and topo's own (nodes up, restarts, stalls, calls, errors, call latency)
in Prometheus' text format at ``/metrics``, so an existing Prometheus and Grafana can
chart a run.

It listens on 127.0.0.1 unless asked otherwise, and answers only a request that carries
the run's metrics token (``Authorization: Bearer TOKEN``; Prometheus reads it with
``authorization: {credentials_file: RUN_DIR/metrics.token}``); the token is a random
secret written to the run directory, readable by its owner only. Each scrape renders
the launcher's summary (what ``status.json`` holds) at that moment."""

from __future__ import annotations

import hmac
import math
import os
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from topo.diagnostics import TopoError
from topo.runs.figures import STAMPS

TOKEN_FILE = "metrics.token"
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_NAME_BAD = re.compile(r"[^a-zA-Z0-9_:]")


def metric_name(key: str) -> str:
    """``key`` as a Prometheus metric name: ``topo_metric_`` and the key, every character
    a name cannot hold made ``_``."""
    return "topo_metric_" + _NAME_BAD.sub("_", key)


def _label(value: Any) -> str:
    text = str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
    return f'"{text}"'


def _labels(**given: Any) -> str:
    return "{" + ",".join(f"{k}={_label(v)}" for k, v in given.items() if v is not None) + "}"


def _value(value: Any) -> str | None:
    if isinstance(value, bool):
        return "1" if value else "0"
    if not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return repr(float(value)) if isinstance(value, float) else str(value)


class _Families:
    """Samples grouped by metric name, each family with its HELP and TYPE once."""

    def __init__(self) -> None:
        self._order: list[str] = []
        self._families: dict[str, tuple[str, str, list[str]]] = {}

    def add(self, name: str, kind: str, help_text: str, labels: str, value: Any) -> None:
        shown = _value(value)
        if shown is None:
            return
        if name not in self._families:
            self._order.append(name)
            self._families[name] = (kind, help_text, [])
        self._families[name][2].append(f"{name}{labels} {shown}")

    def text(self) -> str:
        lines = []
        for name in self._order:
            kind, help_text, samples = self._families[name]
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *samples]
        return "\n".join(lines) + "\n"


def exposition(summary: Mapping[str, Any]) -> str:
    """The text a scrape gets of the run whose summary (``status.json``'s) is given."""
    out = _Families()
    run = {"run": summary.get("id"), "program": summary.get("program")}
    out.add("topo_run_up", "gauge", "1 while the run runs.", _labels(**run), _run_up(summary))
    for node in _nodes(summary):
        labels = {**run, "node": node.get("id"), "group": node.get("group")}
        shown = _labels(**labels)
        out.add(
            "topo_node_up",
            "gauge",
            "1 while the node runs.",
            shown,
            node.get("state") == "running",
        )
        out.add(
            "topo_node_restarts_total",
            "counter",
            "Restarts of the node.",
            shown,
            node.get("restarts", 0),
        )
        out.add(
            "topo_node_stalled",
            "gauge",
            "1 while the node is flagged stalled.",
            shown,
            node.get("stalled_s") is not None,
        )
        metrics = node.get("metrics")
        for key, value in sorted(metrics.items() if isinstance(metrics, Mapping) else []):
            if key not in STAMPS:
                out.add(metric_name(key), "gauge", f"The node's metric {key}.", shown, value)
        _calls(out, labels, node.get("rpc"))
    return out.text()


def _run_up(summary: Mapping[str, Any]) -> bool:
    return summary.get("state") in ("starting", "running")


def _nodes(summary: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    nodes = summary.get("nodes")
    return [n for n in nodes if isinstance(n, Mapping)] if isinstance(nodes, list) else []


def _calls(out: _Families, labels: Mapping[str, Any], rpc: Any) -> None:
    """The node's call figures: totals per method and direction, p50/p99 per direction."""
    if not isinstance(rpc, Mapping):
        return
    for direction in ("served", "made"):
        for entry in rpc.get(direction) or []:
            if not isinstance(entry, Mapping):
                continue
            shown = _labels(
                **labels, direction=direction, peer=entry.get("peer"), method=entry.get("method")
            )
            calls = entry.get("calls")
            out.add("topo_calls_total", "counter", "Calls served or made.", shown, calls)
            out.add(
                "topo_call_errors_total",
                "counter",
                "Calls that failed.",
                shown,
                entry.get("errors"),
            )
        latency = (rpc.get("latency") or {}).get(direction) or {}
        for quantile, key in (("0.5", "p50_ms"), ("0.99", "p99_ms")):
            ms = latency.get(key) if isinstance(latency, Mapping) else None
            seconds = ms / 1000 if isinstance(ms, int | float) else None
            shown = _labels(**labels, direction=direction, quantile=quantile)
            out.add(
                "topo_call_latency_seconds",
                "gauge",
                "Call latency over the last interval, by quantile.",
                shown,
                seconds,
            )


def new_token(run_dir: Path) -> str:
    """A fresh token, written to ``run_dir/metrics.token`` (0600)."""
    token = secrets.token_urlsafe(32)
    path = run_dir / TOKEN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(token + "\n")
    return token


class MetricsEndpoint:
    """``/metrics`` of one run, served on a thread of the launcher until ``close``."""

    def __init__(
        self,
        run_dir: Path,
        summary: Callable[[], Mapping[str, Any]],
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        token = new_token(run_dir)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                given = self.headers.get("Authorization", "")
                bearer = given[7:].strip() if given.lower().startswith("bearer ") else None
                if bearer is None or not hmac.compare_digest(bearer.encode(), token.encode()):
                    self._answer(401, "a scrape needs the run's metrics token\n")
                    return
                if self.path.split("?")[0] != "/metrics":
                    self._answer(404, "only /metrics is served here\n")
                    return
                self._answer(200, exposition(summary()))

            def _answer(self, code: int, text: str) -> None:
                body = text.encode()
                self.send_response(code)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(body)))
                if code == 401:
                    self.send_header("WWW-Authenticate", "Bearer")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # (scrapes are not the run's events)

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise TopoError.one(
                f"cannot serve the metrics on {host}:{port}: {exc.strerror or exc}",
                hint="pick another --metrics-port, or 0 for any free port",
            ) from None
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_address[1]}/metrics"
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="topo-metrics-endpoint", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
