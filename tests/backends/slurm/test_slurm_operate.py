"""A run submitted with ``topo run FILE -b slurm -d`` operated from the login node (a
shell without a job of its own) like any run: ``topo ps`` lists it with Slurm's state
next to topo's, ``status``, ``logs``, ``snapshot``, ``apply`` and ``stop`` reach its
launcher in the job over its TCP control channel. A job still pending is listed with
Slurm's reason and ``topo stop`` cancels it; a job killed under a live run reads lost at
once. Nothing is left: no job, no step, no process (by pid)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import psutil
import pytest

from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.test_submit_run import login_env
from topo.testing import wait_until
from topo.ui.reader import RunReader

pytestmark = pytest.mark.slow
JOB_S = 240.0  # a job of the test cluster starts, or ends, within this under load
OPS = """name: ops
nodes:
  counter: {target: "topo.nodes:Counter"}
  stepper: {target: "topo.testing.nodes:Stepper", args: {counter: "@counter"}}
  ticker: {target: "topo.testing.nodes:Ticker", args: {name: t, every: 0.2}}
"""
MORE = OPS + '  other: {target: "topo.testing.nodes:Ticker", args: {name: u, every: 0.2}}\n'


def shell(slurm: SlurmCluster, cwd: Path) -> dict[str, str]:
    """The login node's shell of a test: its own list of runs (``TOPO_HOME``)."""
    return {**login_env(slurm), "TOPO_HOME": str(cwd / ".topo-home")}


def topo(slurm: SlurmCluster, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``topo ARGS`` from the login node's shell in ``cwd``."""
    return subprocess.run(
        [sys.executable, "-m", "topo", *args],
        cwd=cwd,
        env=shell(slurm, cwd),
        capture_output=True,
        text=True,
        timeout=JOB_S,
    )


def submit(slurm: SlurmCluster, cwd: Path, text: str, *extra: str) -> tuple[str, Path]:
    """``topo run FILE -b slurm -d EXTRA``: the job id and the run directory."""
    path = cwd / "ops.yaml"
    path.write_text(text)
    done = topo(slurm, cwd, "run", str(path), "-b", "slurm", "-d", *extra)
    assert done.returncode == 0, done.stderr
    job, run_dir = done.stdout.split()
    return job, Path(run_dir)


def ps_row(slurm: SlurmCluster, cwd: Path, *flags: str) -> str:
    """The single row ``topo ps`` shows ("" when none)."""
    done = topo(slurm, cwd, "ps", *flags)
    assert done.returncode == 0, done.stderr
    rows = done.stdout.splitlines()[1:]
    assert len(rows) <= 1, done.stdout
    return rows[0] if rows else ""


def pids_of(run_dir: Path) -> set[int]:
    """The launcher (the job's batch shell), everything below it, and every node pid."""
    status = json.loads((run_dir / "status.json").read_text())
    launcher = int(status["launcher"]["pid"])
    pids = {launcher} | {int(n["pid"]) for n in status["nodes"] if n.get("pid")}
    try:
        pids |= {p.pid for p in psutil.Process(launcher).children(recursive=True)}
    except psutil.NoSuchProcess:
        pass
    return pids


def gone(pids: set[int]) -> bool:
    return not [p for p in pids if psutil.pid_exists(p) and not _zombie(p)]


def _zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def seen_in_dashboard(slurm: SlurmCluster, cwd: Path, run_dir: Path) -> None:
    """``topo ui RUN`` from the login node serves the run in the job: running, each node
    on its Slurm node; Ctrl-C ends the dashboard, not the run."""
    ui = subprocess.Popen(
        [sys.executable, "-m", "topo", "ui", str(run_dir)],
        cwd=cwd,
        env=shell(slurm, cwd),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert ui.stdout is not None
        url = ui.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and "?token=" in url, url
        with urllib.request.urlopen(url.replace("/?", "/api/run?"), timeout=30) as reply:
            shown = json.load(reply)
        assert shown["state"] == "running", shown
        hosts = {n["id"]: n.get("host") for n in shown["nodes"]}
        assert {"counter", "stepper", "ticker", "other"} <= set(hosts), hosts
        assert set(hosts.values()) <= set(slurm.nodes), hosts
        ui.send_signal(signal.SIGINT)
        assert ui.wait(30) == 0
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()


def test_a_detached_run_is_operated_from_the_login_node(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job, run_dir = submit(slurm_cluster, tmp_path, OPS)
    wait_until(
        lambda: "running · RUNNING" in ps_row(slurm_cluster, tmp_path),
        JOB_S,
        what=f"job {job} running",
    )
    wait_until(lambda: "t tick 3" in topo(slurm_cluster, tmp_path, "logs").stdout, JOB_S)
    pids = pids_of(run_dir)
    row = ps_row(slurm_cluster, tmp_path)
    assert " slurm " in row and " 3/3 " in row, row
    status = json.loads(topo(slurm_cluster, tmp_path, "status", "--json").stdout)
    assert status["control"].startswith("tcp://"), status["control"]
    assert status["slurm"] == {"job_id": job, "state": "RUNNING", "reason": None}
    shown = topo(slurm_cluster, tmp_path, "status")
    assert "running · RUNNING" in shown.stderr and "ticker" in shown.stdout, shown
    taken = topo(slurm_cluster, tmp_path, "snapshot")
    assert taken.returncode == 0, taken.stderr
    assert Path(taken.stdout.strip()) == run_dir / "snapshots" / "1"
    more = tmp_path / "more.yaml"
    more.write_text(MORE)
    applied = topo(slurm_cluster, tmp_path, "apply", str(run_dir), str(more))
    assert applied.returncode == 0, applied.stderr
    wait_until(lambda: "u tick 2" in topo(slurm_cluster, tmp_path, "logs").stdout, JOB_S)
    seen_in_dashboard(slurm_cluster, tmp_path, run_dir)
    follow, attach = (
        subprocess.Popen(
            [sys.executable, "-m", "topo", *args, str(run_dir)],
            cwd=tmp_path,
            env=shell(slurm_cluster, tmp_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for args in (["logs", "-f"], ["attach"])
    )
    try:
        stopped = topo(slurm_cluster, tmp_path, "stop")
        assert stopped.returncode == 0, stopped.stderr
        assert "✓ run " in stopped.stderr and "stopped" in stopped.stderr, stopped.stderr
        out, _ = follow.communicate(timeout=JOB_S)  # -f ends with the run
        seen, _ = attach.communicate(timeout=JOB_S)  # and so does attach
    finally:
        for proc in (follow, attach):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert "t tick" in out and "u tick" in out, out
    assert attach.returncode == 0 and "✓ run " in seen and "ticker" in seen, seen
    wait_until(lambda: slurm_cluster.jobs() == [], JOB_S, what=f"job {job} ended")
    wait_until(lambda: gone(pids), 60, what="the run's processes ended")
    assert ps_row(slurm_cluster, tmp_path) == ""


def test_a_pending_job_is_listed_with_its_reason_and_stop_cancels_it(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job, run_dir = submit(slurm_cluster, tmp_path, OPS, "--sbatch-args", "--begin=now+1hour")
    row = ps_row(slurm_cluster, tmp_path)
    assert " ops " in row and "starting · PENDING (BeginTime)" in row, row
    said = topo(slurm_cluster, tmp_path, "status")
    assert said.returncode == 0, said.stderr
    assert f"Slurm job {job} waits in the queue (BeginTime)" in said.stderr, said.stderr
    stopped = topo(slurm_cluster, tmp_path, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"Slurm job {job} cancelled before it ran" in stopped.stderr, stopped.stderr
    wait_until(lambda: slurm_cluster.jobs() == [], 60, what=f"job {job} gone from squeue")
    assert ps_row(slurm_cluster, tmp_path) == ""
    assert "ended · CANCELLED" in ps_row(slurm_cluster, tmp_path, "-a")
    assert not (run_dir / "status.json").exists()  # topo never ran in it


def test_a_job_cancelled_while_running_reads_stopped(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    job, run_dir = submit(slurm_cluster, tmp_path, OPS)
    wait_until(
        lambda: "running · RUNNING" in ps_row(slurm_cluster, tmp_path),
        JOB_S,
        what=f"job {job} running",
    )
    pids = pids_of(run_dir)
    cancelled = slurm_cluster.run("scancel", job)  # SIGTERM to the launcher: it stops the run
    assert cancelled.returncode == 0, cancelled.stderr
    wait_until(lambda: ps_row(slurm_cluster, tmp_path) == "", JOB_S, what="the run ended")
    row = ps_row(slurm_cluster, tmp_path, "-a")
    assert "ended (exit 143)" in row, row
    wait_until(lambda: slurm_cluster.jobs() == [], 60, what=f"job {job} gone from squeue")
    wait_until(lambda: gone(pids), 60, what="the run's processes ended")


def test_a_launcher_killed_on_another_node_reads_lost_from_slurm(
    slurm_cluster: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job, run_dir = submit(slurm_cluster, tmp_path, OPS)
    wait_until(
        lambda: "running · RUNNING" in ps_row(slurm_cluster, tmp_path),
        JOB_S,
        what=f"job {job} running",
    )
    pids = pids_of(run_dir)
    status_file = run_dir / "status.json"
    launcher = json.loads(status_file.read_text())["launcher"]["pid"]
    os.kill(int(launcher), signal.SIGKILL)  # no final record: as a node lost
    wait_until(lambda: not psutil.pid_exists(int(launcher)), 60, what="the launcher gone")
    status = json.loads(status_file.read_text())
    assert status["state"] == "running"
    status["launcher"]["host"] = "elsewhere"  # as on a login node: its pid cannot be checked
    status_file.write_text(json.dumps(status))
    wait_until(lambda: slurm_cluster.job_state(job) not in ("RUNNING", "COMPLETING"), JOB_S)
    row = ps_row(slurm_cluster, tmp_path)
    assert " lost · FAILED" in row, row
    said = topo(slurm_cluster, tmp_path, "status")
    assert f"its Slurm job {job} ended FAILED" in said.stderr, said.stderr
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))  # the dashboard's reader
    reader = RunReader(run_dir)
    assert reader.status().state == "running"  # as the file says, at first
    wait_until(lambda: reader.status().state == "lost", 60, what="the dashboard reads lost")
    stopped = topo(slurm_cluster, tmp_path, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert f"is lost: its Slurm job {job} ended FAILED" in stopped.stderr, stopped.stderr
    assert "cleared" in stopped.stderr, stopped.stderr
    wait_until(lambda: slurm_cluster.jobs() == [], 60, what=f"job {job} gone from squeue")
    wait_until(lambda: gone(pids), 60, what="the run's processes ended")
    assert ps_row(slurm_cluster, tmp_path) == ""
