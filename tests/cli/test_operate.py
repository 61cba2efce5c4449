"""Operating a run from other shells, with the real CLI: ``topo run -d`` returns once the
run is up, then ``ps``, ``status``, ``logs`` (``-f`` in a real pty), ``attach`` (a real
pty; Ctrl-C detaches) and ``stop``; a launcher killed with SIGKILL makes a *lost* run
and leaves no node behind; a run that cannot start leaves nothing at all."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.operate import env, run_detached, run_pids, status, ticker_topology, topo
from topo.testing import wait_gone, wait_until


def _spawn(cwd: Path, *args: str, width: int = 120) -> pexpect.spawn:
    e = env(cwd)
    e.pop("NO_COLOR")
    e.pop("COLUMNS")
    e["TERM"] = "xterm-256color"
    return pexpect.spawn(
        sys.executable,
        ["-m", "topo", *args],
        cwd=str(cwd),
        env=e,
        dimensions=(40, width),
        encoding="utf-8",
        codec_errors="replace",
        timeout=60,
    )


def _ticks(text: str, node: str) -> list[int]:
    return [int(n) for n in re.findall(rf"{re.escape(node)}\s*\| t tick (\d+)", text)]


@pytest.mark.slow
def test_a_detached_run_is_operated_from_other_shells(tmp_path: Path) -> None:
    """What the command line adds on top of the conformance suite's detached run (on every
    backend): ``ps --json``, ``logs -n -t``, ``logs -f`` and ``attach`` in a real pty."""
    backend = "procs"
    file = ticker_topology(tmp_path / "tickers.yaml")
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", backend)
    pids = run_pids(run_dir)
    try:
        assert (tmp_path / "runs" / "latest").resolve() == run_dir
        listed = topo("ps", cwd=tmp_path)
        [row] = [line for line in listed.stdout.splitlines() if line.startswith(run_id)]
        assert re.search(rf"tickers\s+{backend}\s+running\s+2/2", row), listed.stdout
        [as_json] = json.loads(topo("ps", "--json", cwd=tmp_path).stdout)  # this test's only
        assert as_json["id"] == run_id and as_json["launcher_pid"] in pids

        shown = topo("status", run_id[:4], cwd=tmp_path)  # a unique prefix names it
        assert shown.returncode == 0, shown.stderr
        assert re.search(r"ticker/0 .* running", shown.stdout), shown.stdout
        assert re.search(r"ticker/1 .* running", shown.stdout), shown.stdout

        wait_until(
            lambda: len(_ticks(topo("logs", cwd=tmp_path).stdout, "ticker/1")) >= 3,
            30,
            what="3 ticks of ticker/1 in topo logs",
        )
        last = topo("logs", "ticker/1", "-n", "2", "-t", cwd=tmp_path).stdout.splitlines()
        assert len(last) == 2 and all(re.match(r"ticker/1 \| \d{4}-\d\d-\d\dT", s) for s in last)

        follow = _spawn(tmp_path, "logs", "-f", "-n", "1", run_id, "ticker/0")
        follow.expect(r"ticker/0 \| t tick (\d+)")
        first = int(follow.match.group(1))
        follow.expect(rf"ticker/0 \| t tick ({first + 3})")  # new lines keep coming
        follow.sendintr()
        follow.expect(pexpect.EOF)
        follow.close()
        assert follow.exitstatus == 130
        assert "ticker/1" not in (follow.before or "")

        attached = _spawn(tmp_path, "attach", width=120)
        attached.expect("ticker/1")
        attached.expect("running")
        attached.sendintr()
        attached.expect(f"detached from run {run_id}")
        attached.expect(pexpect.EOF)
        attached.close()
        assert attached.exitstatus == 0
        assert status(run_dir)["state"] == "running"  # detaching does not stop it

        stopped = topo("stop", run_id, "--grace", "10", cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert "stopped" in stopped.stderr
        assert status(run_dir)["state"] == "ended" and status(run_dir)["exit_code"] == 0
        launcher_log = (run_dir / "launcher.log").read_text()
        assert "■ stopping: topo stop (grace 10s; topo stop --kill to kill)" in launcher_log
        assert not wait_gone(pids, 20)
        everything = topo("ps", "-a", cwd=tmp_path).stdout
        assert re.search(rf"{run_id}\s+tickers\s+{backend}\s+ended \(exit 0\)", everything)
        after = topo("logs", run_id, "ticker/0", cwd=tmp_path)  # after the end too
        assert len(_ticks(after.stdout, "ticker/0")) > first
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_a_launcher_killed_with_sigkill_makes_a_lost_run_and_leaves_no_node(
    tmp_path: Path,
) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml", count=3)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    assert len(pids) >= 4  # the launcher, its fork server, three nodes
    os.kill(status(run_dir)["launcher"]["pid"], signal.SIGKILL)
    assert not wait_gone(pids, 20)
    listed = topo("ps", cwd=tmp_path).stdout
    assert re.search(rf"{run_id}\s+tickers\s+procs\s+lost", listed), listed
    stopped = topo("stop", cwd=tmp_path)  # clears it (tests/cli/test_lost_runs.py)
    assert stopped.returncode == 0 and f"run {run_id} is lost" in stopped.stderr


def test_run_d_of_a_bad_file_says_where_and_starts_nothing(tmp_path: Path) -> None:
    file = tmp_path / "bad.yaml"
    file.write_text("name: bad\nnodes:\n  a:\n    target: tests.cli.ticker:Ticker\n    cont: 2\n")
    done = topo("run", str(file), "-d", cwd=tmp_path)
    assert done.returncode == 1
    assert re.search(r"bad\.yaml:5:5: error: .*cont", done.stderr), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").iterdir())


def test_run_d_of_a_node_that_fails_at_start_fails_and_leaves_nothing(tmp_path: Path) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml", fail=True)
    done = topo("run", str(file), "-d", "-b", "procs", cwd=tmp_path)
    assert done.returncode == 1
    assert "refuses to start" in done.stderr
    assert done.stdout == ""  # no run id: nothing goes on
    run_dir = (tmp_path / "runs" / "latest").resolve()
    assert status(run_dir)["state"] == "ended"
    assert not wait_gone(run_pids(run_dir), 20)
    assert [p.name for p in (tmp_path / "runs").iterdir() if p.name.startswith(".")] == []


def test_stop_kill_ends_a_run_whose_nodes_ignore_the_stop(tmp_path: Path) -> None:
    file = tmp_path / "deaf.yaml"
    file.write_text(
        "name: deaf\nnodes:\n  deaf:\n    target: tests.cli.deaf:Deaf\nstop: {grace_s: 60}\n"
    )
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    stopped = topo("stop", run_id, "--kill", cwd=tmp_path, timeout=30)
    assert stopped.returncode == 0, stopped.stderr
    assert not wait_gone(pids, timeout=10)
