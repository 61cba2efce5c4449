"""Helpers of the dashboard tests: a run directory as the launcher leaves it (from a
real compiled program), a dashboard serving it on a thread, and plain HTTP requests."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psutil

from tests.cli.operate import env
from tests.conftest import EXAMPLES, compile_file
from topo.ir import dumps
from topo.testing import Lines
from topo.ui.serve import open_dashboard
from topo.ui.server import Dashboard

TOKEN = "test-token-" + "x" * 32


def make_run_dir(path: Path, program: str = "consumer_producers", state: str = "ended") -> Path:
    """A run directory with program.json, status.json, a log, metrics and events."""
    prog = compile_file(EXAMPLES / f"{program}.yaml")
    path.mkdir(parents=True, exist_ok=True)
    (path / "program.json").write_text(dumps(prog))
    nodes: list[dict[str, Any]] = [
        {
            "id": n.id,
            "group": n.group,
            "executable": n.executable,
            "state": "running",
            "pid": None,
            "host": None,
            "restarts": 0,
            "since": time.time(),
            "metrics": {},
        }
        for n in prog.nodes
    ]
    status = {
        "id": "feedbeef",
        "program": prog.name,
        "backend": "procs",
        "state": state,
        "exit_code": 0 if state == "ended" else None,
        "started": time.time() - 5,
        "launcher": {"pid": 1, "start": None, "host": None},
        "nodes": nodes,
        "warnings": [],
        "control": None,
    }
    (path / "status.json").write_text(json.dumps(status))
    (path / "logs").mkdir(exist_ok=True)
    lines = [f"2026-12-03T10:00:0{i}.000 line {i} of producer 0" for i in range(5)]
    (path / "logs" / "producer_0.log").write_text("\n".join(lines) + "\n")
    (path / "metrics").mkdir(exist_ok=True)
    rows = [{"time": 100.0 + i, "node": "consumer", "done": i, "label": "c"} for i in range(3)]
    (path / "metrics" / "consumer.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    events = [
        {"time": 100.0, "kind": "starting", "executable": "consumer"},
        {"time": 101.0, "kind": "applied", "generation": 2, "message": "a change"},
    ]
    (path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


@contextmanager
def serving(run_dir: Path, host: str = "127.0.0.1", port: int = 0) -> Iterator[Dashboard]:
    """A dashboard of ``run_dir`` on ``port`` (0: a free one), served on a thread while in
    the block."""
    dashboard = open_dashboard(run_dir, host, port, TOKEN)
    thread = threading.Thread(target=dashboard.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield dashboard
    finally:
        dashboard.close()
        thread.join(5)
        dashboard.close_log()


def call(
    dashboard: Dashboard,
    path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    body: Any = None,
) -> tuple[int, dict[str, str], bytes]:
    """One request: (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", dashboard.server_address[1], timeout=10)
    data = None if body is None else json.dumps(body).encode()
    sent = {"Host": f"127.0.0.1:{dashboard.server_address[1]}", **(headers or {})}
    if data is not None:
        sent["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=sent)
    reply = conn.getresponse()
    out = reply.status, {k.lower(): v for k, v in reply.getheaders()}, reply.read()
    conn.close()
    return out


def cookie(dashboard: Dashboard) -> dict[str, str]:
    """The Cookie header a browser holds after its first visit."""
    return {"Cookie": f"{dashboard.gate.cookie_name}={TOKEN}"}


def start_with_ui(
    cwd: Path, args: list[str], started: list[subprocess.Popen[str]], timeout: float = 120
) -> tuple[subprocess.Popen[str], str, int, Path]:
    """``topo run ARGS --ui --no-live`` in ``cwd``: the process, the dashboard's URL, the
    dashboard's pid and the run directory (the process is added to ``started``)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "topo", "run", *args, "--ui", "--no-live"],
        cwd=cwd,
        env=env(cwd),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    started.append(proc)
    assert proc.stderr is not None
    said = Lines(proc.stderr)  # read on (and kept) to the end
    line = said.wait_for(lambda ln: ln.startswith("dashboard: ") or "no dashboard" in ln, timeout)
    assert line.startswith("dashboard: "), "topo run --ui printed no URL: " + said.text()
    url = line.split()[1]
    [run_dir] = [p for p in (cwd / "runs").glob("*-*") if p.is_dir()]
    title = f"topo: ui {run_dir.name}"  # the dashboard's process title
    children = psutil.Process(proc.pid).children()
    [child] = [p for p in children if " ".join(p.cmdline()).strip() == title]
    return proc, url, child.pid, run_dir


def end_all(started: list[subprocess.Popen[str]]) -> None:
    """Kill what a test started and did not end (a failed test)."""
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
