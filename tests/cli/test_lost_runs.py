"""A lost run (its launcher killed with SIGKILL) as every command shows it, and cleared:
its nodes read ``lost`` in ``ps``, ``status`` (table and ``--json``) and the dashboard's
API, with no uptime counting; a node whose process outlived the launcher reads
``orphaned`` and ``topo stop`` ends it, checked by pid and start time; the fork server
that outlives the launcher removes the nodes' socket directory, ``topo stop`` what is left
in the temporary directory, and marks the run ended (lost); a
script that raises after ``topo.launch`` ends its run with it. Real runs, real CLI."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.cli.operate import env, run_detached, run_pids, status, ticker_topology, topo
from topo.rundir.pids import process_start
from topo.testing import wait_gone


def temp_dirs(run_dir: Path) -> list[Path]:
    """The run's directories in the temporary directory, as its record names them."""
    st = status(run_dir)
    return [Path(st["socket_dir"]), Path(st["control"]).parent]


def kill_launcher(run_dir: Path) -> int:
    pid = int(status(run_dir)["launcher"]["pid"])
    os.kill(pid, signal.SIGKILL)
    assert not wait_gone({pid}, 20)
    return pid


def row_of(listing: str, run_id: str) -> str:
    [row] = [line for line in listing.splitlines() if line.startswith(run_id)]
    return row


def api_run(cwd: Path, run_id: str) -> dict[str, Any]:
    """What ``topo ui RUN``'s API says of the run (the dashboard draws from it)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "topo", "ui", run_id],
        cwd=cwd,
        env=env(cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://"), proc.stderr.read() if proc.stderr else ""
        with urllib.request.urlopen(url.replace("/?", "/api/run?"), timeout=30) as reply:
            answer: dict[str, Any] = json.load(reply)
            return answer
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


@pytest.mark.slow
def test_a_lost_run_and_its_nodes_read_lost_everywhere(tmp_path: Path) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml", count=3)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    launcher = kill_launcher(run_dir)
    assert not wait_gone(pids, 20)  # its nodes died with it (procs: the parent-death signal)

    row = row_of(topo("ps", cwd=tmp_path).stdout, run_id)
    assert re.search(r"tickers\s+procs\s+lost\s+0/3\s", row), row
    [listed] = json.loads(topo("ps", "--json", cwd=tmp_path).stdout)
    assert (listed["state"], listed["nodes_up"]) == ("lost", 0)

    record = json.loads(topo("status", run_id, "--json", cwd=tmp_path).stdout)
    assert record["state"] == "lost"
    assert [n["state"] for n in record["nodes"]] == ["lost"] * 3

    shown = topo("status", run_id, cwd=tmp_path)
    rows = [line for line in shown.stdout.splitlines() if line.startswith("ticker/")]
    assert len(rows) == 3 and all(" lost " in r and "running" not in r for r in rows), shown
    assert not any(re.search(r"\b\d+:\d\d\b", r) for r in rows)  # no uptime counting
    assert f"lost — its launcher (pid {launcher}) ended without ending the run" in shown.stderr
    assert f"topo stop {run_id} clears what is left" in shown.stderr

    page = api_run(tmp_path, run_id)  # the dashboard's reading of the run
    assert page["state"] == "lost"
    assert {n["state"] for n in page["nodes"]} == {"lost"}

    sockets, control = temp_dirs(run_dir)
    # The fork server, which outlived the launcher, removed the nodes' socket directory
    # as it ended them; nobody removed the launcher's own control directory.
    assert not sockets.exists() and control.is_dir()
    stopped = topo("stop", run_id, cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert "no process was left running" in stopped.stderr
    assert str(control) in stopped.stderr and str(sockets) not in stopped.stderr
    assert not control.exists()
    assert status(run_dir)["state"] == "ended" and "lost" in status(run_dir)["stop_reason"]
    assert run_id not in topo("ps", cwd=tmp_path).stdout  # over: listed with -a only
    assert re.search(r"ended \(lost\)", row_of(topo("ps", "-a", cwd=tmp_path).stdout, run_id))
    again = topo("stop", run_id, cwd=tmp_path)
    assert again.returncode == 0 and "already ended (lost, cleared)" in again.stderr


@pytest.mark.slow
@pytest.mark.parametrize("how", [["--grace", "1"], ["--kill"]])
def test_stop_of_a_lost_run_ends_what_it_left_running(tmp_path: Path, how: list[str]) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml", count=2)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    launcher = int(status(run_dir)["launcher"]["pid"])
    node = {n["id"]: int(n["pid"]) for n in status(run_dir)["nodes"]}["ticker/0"]
    children = psutil.Process(launcher).children()
    [server] = [p.pid for p in children if "fork server" in " ".join(p.cmdline())]
    # Stopped, the fork server cannot end its children when the launcher dies, nor can
    # node ticker/0's watchdog end it: both outlive the launcher (ticker/1 ends).
    os.kill(server, signal.SIGSTOP)
    os.kill(node, signal.SIGSTOP)
    started = process_start(node)
    try:
        kill_launcher(run_dir)
        assert not wait_gone(pids - {node, server}, 20)
        assert process_start(node) == started

        record = json.loads(topo("status", run_id, "--json", cwd=tmp_path).stdout)
        states = {n["id"]: n["state"] for n in record["nodes"]}
        assert states == {"ticker/0": "orphaned", "ticker/1": "lost"}
        row = row_of(topo("ps", cwd=tmp_path).stdout, run_id)
        assert re.search(r"lost \(1 orphaned\)\s+0/2", row), row
        shown = topo("status", run_id, cwd=tmp_path)
        assert re.search(r"ticker/0 .* orphaned", shown.stdout), shown.stdout
        assert "1 node(s) still running unwatched" in shown.stderr

        stopped = topo("stop", run_id, *how, cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        said = (
            f"ended 2 process(es) left running: ticker/0 (pid {node}), "
            f"the backend's helper (pid {server})"
        )
        assert said in stopped.stderr, stopped.stderr
        assert not wait_gone({node, server}, timeout=5)
        assert not any(d.exists() for d in temp_dirs(run_dir))
        after = {n["id"]: n["state"] for n in status(run_dir)["nodes"]}
        assert after == {"ticker/0": "killed", "ticker/1": "lost"}
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_stop_of_a_lost_run_never_signals_a_reused_pid(tmp_path: Path) -> None:
    """A node's pid now names another process (the record's start time does not match):
    it reads lost and ``topo stop`` leaves that process alone."""
    file = ticker_topology(tmp_path / "tickers.yaml", count=1)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    kill_launcher(run_dir)
    assert not wait_gone(pids, 20)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        record = status(run_dir)  # as if the node's pid had been reused by `other`
        record["nodes"][0]["pid"] = other.pid
        (run_dir / "status.json").write_text(json.dumps(record))
        shown = json.loads(topo("status", run_id, "--json", cwd=tmp_path).stdout)
        assert shown["nodes"][0]["state"] == "lost"
        stopped = topo("stop", run_id, "--kill", cwd=tmp_path)
        assert stopped.returncode == 0 and "no process was left running" in stopped.stderr
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


SCRIPT = """\
import sys
import topo

run = topo.launch(sys.argv[1], backend=sys.argv[2], ready_timeout=60)
print(run.run_dir, flush=True)
raise RuntimeError("the experiment's own bug")
"""


@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_a_script_that_raises_after_topo_launch_ends_its_run(tmp_path: Path, backend: str) -> None:
    script = tmp_path / "experiment.py"
    script.write_text(textwrap.dedent(SCRIPT))
    file = ticker_topology(tmp_path / "tickers.yaml", count=2)
    done = subprocess.run(
        [sys.executable, str(script), str(file), backend],
        cwd=tmp_path,
        env=env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "RuntimeError: the experiment's own bug" in done.stderr
    run_dir = Path(done.stdout.split()[0])
    record = status(run_dir)
    assert (record["state"], record["exit_code"]) == ("ended", 1), record["state"]
    assert "uncaught RuntimeError: the experiment's own bug" in record["stop_reason"]
    assert not any(d.exists() for d in temp_dirs(run_dir))
    listed = topo("ps", "-a", cwd=tmp_path).stdout
    assert re.search(r"tickers\s+" + backend + r"\s+ended \(exit 1\)", listed), listed
    assert not wait_gone({int(n["pid"]) for n in record["nodes"] if n.get("pid")}, 20)
