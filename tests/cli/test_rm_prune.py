"""``topo rm`` and ``topo prune`` with the real CLI: an ended run is removed (its listing,
its run directory unless kept), a lost one too with what it left in the temporary
directory; a live one is refused unless ``-f`` (which kills it first); ``prune`` asks on a
terminal, refuses without one unless ``-f``, and never touches a live run or a run of
another ``TOPO_HOME``."""

from __future__ import annotations

import io
import os
import re
import signal
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.operate import env, run_detached, run_pids, status, ticker_topology, topo
from topo.testing import wait_gone


def ended_run(cwd: Path, file: Path) -> tuple[str, Path]:
    run_id, run_dir = run_detached(cwd, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    assert topo("stop", run_id, cwd=cwd).returncode == 0
    assert not wait_gone(pids, 20)
    return run_id, run_dir


def lost_run(cwd: Path, file: Path) -> tuple[str, Path, list[Path]]:
    """A run whose launcher was killed with SIGKILL, and what it left in /tmp: its control
    directory (the fork server, which outlived it, removed the nodes' socket directory)."""
    run_id, run_dir = run_detached(cwd, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    record = status(run_dir)
    sockets, control = Path(record["socket_dir"]), Path(record["control"]).parent
    os.kill(int(record["launcher"]["pid"]), signal.SIGKILL)
    assert not wait_gone(pids, 20)
    assert not sockets.exists() and control.is_dir()
    return run_id, run_dir, [control]


def listed(cwd: Path) -> list[str]:
    return topo("ps", "-a", "-q", cwd=cwd).stdout.split()


@pytest.mark.slow
def test_rm_removes_ended_and_lost_runs_and_refuses_a_live_one_unless_forced(
    tmp_path: Path,
) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml")
    ended_id, ended_dir = ended_run(tmp_path, file)
    kept_id, kept_dir = ended_run(tmp_path, file)
    lost_id, lost_dir, lost_left = lost_run(tmp_path, file)
    live_id, live_dir = run_detached(tmp_path, str(file), "-b", "procs")
    live_pids = run_pids(live_dir)
    try:
        refused = topo("rm", live_id, cwd=tmp_path)
        assert refused.returncode == 1
        assert f"run {live_id} is running: stop it first" in refused.stderr
        assert live_dir.is_dir() and live_id in listed(tmp_path)

        done = topo("rm", ended_id, lost_id, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout.split() == [ended_id, lost_id]
        assert f"removed run {ended_id}: {ended_dir}" in done.stderr
        assert not ended_dir.exists() and not lost_dir.exists()
        assert not any(d.exists() for d in lost_left)
        assert all(str(d) in done.stderr for d in lost_left)
        assert ended_id not in listed(tmp_path) and lost_id not in listed(tmp_path)

        kept = topo("rm", kept_id, "--keep-dir", cwd=tmp_path)
        assert kept.returncode == 0 and f"kept {kept_dir}" in kept.stderr
        assert (kept_dir / "status.json").exists() and kept_id not in listed(tmp_path)

        forced = topo("rm", "-f", live_id, cwd=tmp_path)
        assert forced.returncode == 0, forced.stderr
        assert not wait_gone(live_pids, 20)
        assert not live_dir.exists() and live_id not in listed(tmp_path)
        assert not (tmp_path / "runs" / "latest").is_symlink()  # it pointed at that run

        unknown = topo("rm", "nosuchrun", cwd=tmp_path)
        assert unknown.returncode == 1 and "no run 'nosuchrun'" in unknown.stderr
        assert "Traceback" not in unknown.stderr
    finally:
        for pid in live_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow
def test_prune_removes_every_ended_and_lost_run_of_this_home_only(tmp_path: Path) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml")
    elsewhere = tmp_path / "elsewhere"  # another TOPO_HOME (tests.cli.operate: cwd's own)
    elsewhere.mkdir()
    other_id, other_dir = ended_run(elsewhere, file)
    ended_id, ended_dir = ended_run(tmp_path, file)
    lost_id, lost_dir, lost_left = lost_run(tmp_path, file)
    live_id, live_dir = run_detached(tmp_path, str(file), "-b", "procs")
    live_pids = run_pids(live_dir)
    try:
        refused = topo("prune", cwd=tmp_path)  # no terminal to ask, no -f
        assert refused.returncode == 1 and "add -f" in refused.stderr
        assert ended_dir.is_dir() and lost_dir.is_dir()

        asked = _prune_in_a_terminal(tmp_path, answer="n")
        assert "This removes 2 run(s) (1 ended, 1 lost)" in asked and "nothing removed" in asked
        assert ended_dir.is_dir() and lost_dir.is_dir()

        asked = _prune_in_a_terminal(tmp_path, answer="y")
        assert f"removed run {ended_id}" in asked and f"removed run {lost_id}" in asked
        assert "Total reclaimed space: " in asked
        assert not ended_dir.exists() and not lost_dir.exists()
        assert not any(d.exists() for d in lost_left)
        assert listed(tmp_path) == [live_id]
        assert live_dir.is_dir() and status(live_dir)["state"] == "running"
        assert other_dir.is_dir() and listed(elsewhere) == [other_id]

        assert topo("stop", live_id, cwd=tmp_path).returncode == 0
        forced = topo("prune", "-f", cwd=tmp_path)
        assert forced.returncode == 0, forced.stderr
        assert forced.stdout.split() == [live_id]
        assert re.search(r"Total reclaimed space: \d+\.\d KiB", forced.stderr), forced.stderr
        nothing = topo("prune", "-f", cwd=tmp_path)
        assert nothing.returncode == 0 and "nothing to remove" in nothing.stderr
        assert other_dir.is_dir() and listed(elsewhere) == [other_id]
    finally:
        for pid in live_pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _prune_in_a_terminal(cwd: Path, answer: str) -> str:
    """``topo prune`` in a real pty, answering its question; all it printed."""
    seen = io.StringIO()
    child = pexpect.spawn(
        sys.executable,
        ["-m", "topo", "prune"],
        cwd=str(cwd),
        env=env(cwd),
        encoding="utf-8",
        timeout=60,
    )
    child.logfile_read = seen
    child.expect(r"Go on\? \[y/N\] ")
    child.sendline(answer)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == (0 if answer == "y" else 1), seen.getvalue()
    return seen.getvalue()


@pytest.mark.slow
def test_rm_never_removes_the_working_directory_a_run_was_started_in(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    file = ticker_topology(work / "tickers.yaml")
    run_id, run_dir = run_detached(work, str(file), "-b", "threads", "--run-dir", ".")
    assert run_dir == work.resolve()
    assert topo("stop", run_id, cwd=work).returncode == 0
    refused = topo("rm", run_id, cwd=work)
    assert refused.returncode == 1
    assert "it is (or holds) the working or the home directory" in refused.stderr
    assert file.exists() and run_id in listed(work)  # nothing of it removed
    kept = topo("rm", run_id, "--keep-dir", cwd=work)
    assert kept.returncode == 0 and run_id not in listed(work) and file.exists()
