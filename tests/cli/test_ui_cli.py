"""``topo ui``, ``topo run --ui`` and ``topo restart`` as a user types them: bad input is
one line and exit 1, the dashboard serves with its token and ends when it should, and
nothing of it is left behind (checked by pid)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.operate import env, run_detached, run_pids, status, ticker_topology, topo
from tests.ui.support import end_all, start_with_ui
from topo.testing import wait_gone, wait_until


def one_line_error(done: subprocess.CompletedProcess[str], text: str, code: int = 1) -> None:
    assert done.returncode == code, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and text in lines[0], lines


def taken_port() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def start_ui(cwd: Path, run_id: str) -> subprocess.Popen[str]:
    """``topo ui RUN`` with its output piped."""
    return subprocess.Popen(
        [sys.executable, "-m", "topo", "ui", run_id],
        cwd=cwd,
        env=env(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.slow
def test_bad_input_is_one_line_and_exit_1(tmp_path: Path) -> None:
    one_line_error(topo("ui", "nosuchrun", cwd=tmp_path), "no run 'nosuchrun'")
    path = ticker_topology(tmp_path / "t.yaml")
    one_line_error(topo("run", str(path), "--ui", "-d", cwd=tmp_path), "topo ui RUN", code=2)
    with taken_port() as sock:
        port = str(sock.getsockname()[1])
        done = topo("run", str(path), "--ui", "--ui-port", port, "--no-live", cwd=tmp_path)
        one_line_error(done, f"port {port} is in use")
    done = topo("run", str(path), "--ui", "--ui-host", "0.0.0.0", "--no-live", cwd=tmp_path)
    one_line_error(done, "add --ui-allow-remote")
    assert not (tmp_path / "runs").exists()  # refused before anything started


@pytest.mark.slow
def test_topo_ui_serves_a_run_until_ctrl_c(tmp_path: Path) -> None:
    path = ticker_topology(tmp_path / "t.yaml")
    run_id, run_dir = run_detached(tmp_path, str(path))
    try:
        one_line_error(topo("ui", run_id, "--host", "0.0.0.0", cwd=tmp_path), "--allow-remote")
        with taken_port() as sock:
            port = str(sock.getsockname()[1])
            one_line_error(topo("ui", run_id, "--port", port, cwd=tmp_path), "in use")
        proc = start_ui(tmp_path, run_id)
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "?token=" in url
        with urllib.request.urlopen(url.replace("/?", "/api/run?"), timeout=10) as reply:
            assert json.load(reply)["state"] == "running"
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url.split("?")[0] + "api/run", timeout=10)
        assert refused.value.code == 403
        proc.send_signal(signal.SIGINT)
        assert proc.wait(20) == 0
        hasty = start_ui(tmp_path, run_id)  # Ctrl-C the moment the URL shows ends it too
        assert hasty.stdout is not None and hasty.stdout.readline().startswith("http://")
        hasty.send_signal(signal.SIGINT)
        _, said = hasty.communicate(timeout=20)
        assert hasty.returncode == 0 and "Traceback" not in said, said
        token = url.split("token=")[1]
        for file in run_dir.rglob("*"):
            if file.is_file():
                assert token not in file.read_text(errors="replace"), file
    finally:
        pids = run_pids(run_dir)
        topo("stop", run_id, cwd=tmp_path)
        assert not wait_gone(pids, 20)


@pytest.mark.slow
def test_topo_restart_restarts_one_node(tmp_path: Path) -> None:
    path = ticker_topology(tmp_path / "t.yaml", count=2)
    run_id, run_dir = run_detached(tmp_path, str(path))
    try:
        one_line_error(topo("restart", run_id, "nobody", cwd=tmp_path), "no node 'nobody'")
        before = {n["id"]: n["pid"] for n in status(run_dir)["nodes"]}
        done = topo("restart", run_id, "ticker/0", cwd=tmp_path)
        assert done.returncode == 0 and "restarting ticker/0" in done.stderr, done.stderr

        def back() -> bool:
            n = {n["id"]: n for n in status(run_dir)["nodes"]}["ticker/0"]
            return n["restarts"] == 1 and n["state"] == "running" and n["pid"] != before["ticker/0"]

        wait_until(back, 60)
    finally:
        pids = run_pids(run_dir)
        topo("stop", run_id, cwd=tmp_path)
        assert not wait_gone(pids, 20)
    one_line_error(topo("restart", run_id, "ticker/0", cwd=tmp_path), "not running")


@pytest.fixture
def started(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    """The ``topo run`` processes a test started: killed at the end if still there."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    end_all(procs)


@pytest.mark.slow
def test_the_dashboard_of_topo_run_ends_with_the_run(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    path = ticker_topology(tmp_path / "t.yaml")
    proc, url, ui_pid, run_dir = start_with_ui(tmp_path, [str(path)], started)
    with urllib.request.urlopen(url.replace("/?", "/api/run?"), timeout=10) as reply:
        assert json.load(reply)["run"]["program"] == "tickers"
    pids = run_pids(run_dir) | {ui_pid}
    proc.send_signal(signal.SIGINT)  # Ctrl-C: the dashboard ignores it, the run ends it
    assert proc.wait(30) == 130
    assert not wait_gone(pids, 20)


@pytest.mark.slow
def test_the_dashboard_ends_when_topo_run_is_killed(
    tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    path = ticker_topology(tmp_path / "t.yaml")
    proc, _url, ui_pid, run_dir = start_with_ui(tmp_path, [str(path)], started)
    pids = run_pids(run_dir) | {ui_pid}
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(10)
    assert not wait_gone(pids, 20)
