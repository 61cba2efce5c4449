"""What docker and kubectl users reach for, with the real CLI: ``topo ps -q`` and
``--filter KEY=VALUE``, ``topo ps`` fitted to an 80-column terminal (whole rows when
piped), ``topo stop`` of several runs (exit: the first non-zero), ``topo logs --until``."""

from __future__ import annotations

import os
import re
import signal
import sys
from datetime import datetime
from pathlib import Path

import pexpect
import pytest

from tests.cli.operate import env, run_detached, run_pids, status, ticker_topology, topo
from topo.testing import wait_gone, wait_until


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _failed_run(cwd: Path) -> str:
    """The id of a run that ended with exit 1 (its nodes refuse to start)."""
    file = ticker_topology(cwd / "failing.yaml", fail=True)
    assert topo("run", str(file), "-d", "-b", "procs", cwd=cwd).returncode == 1
    [run_id] = topo("ps", "-q", "--filter", "exit=1", cwd=cwd).stdout.split()
    return run_id


@pytest.mark.slow
def test_ps_quiet_and_filters_and_stop_of_several_runs(tmp_path: Path) -> None:
    failed = _failed_run(tmp_path)
    file = ticker_topology(tmp_path / "tickers.yaml")
    procs_id, procs_dir = run_detached(tmp_path, str(file), "-b", "procs")
    threads_id, threads_dir = run_detached(tmp_path, str(file), "-b", "threads")
    pids = run_pids(procs_dir) | run_pids(threads_dir)
    try:
        quiet = topo("ps", "-q", cwd=tmp_path)
        assert quiet.returncode == 0 and quiet.stderr == ""
        assert quiet.stdout.splitlines() == [threads_id, procs_id]  # newest first
        assert topo("ps", "-aq", cwd=tmp_path).stdout.split() == [threads_id, procs_id, failed]
        only = topo("ps", "-q", "--filter", "backend=threads", cwd=tmp_path).stdout.split()
        assert only == [threads_id]
        both = topo("ps", "-q", "-f", "backend=threads", "-f", "backend=procs", cwd=tmp_path)
        assert both.stdout.split() == [threads_id, procs_id]  # one key's values: either
        none = topo("ps", "-q", "-f", "backend=threads", "-f", "state=ended", cwd=tmp_path)
        assert none.stdout == ""  # two keys: both
        assert topo("ps", "-q", "-f", "state=ended", cwd=tmp_path).stdout.split() == [failed]
        assert topo("ps", "-q", "-f", f"id={procs_id[:5]}", cwd=tmp_path).stdout.split() == [
            procs_id
        ]
        named = topo("ps", "-f", "name=tick", "-f", "state=live", cwd=tmp_path).stdout
        assert [line.split()[0] for line in named.splitlines()[1:]] == [threads_id, procs_id]
        for bad, said in [
            ("colour=red", "no key 'colour'"),
            ("state", "give KEY=VALUE"),
            ("state=asleep", "a state is one of"),
        ]:
            refused = topo("ps", "--filter", bad, cwd=tmp_path)
            assert refused.returncode == 2 and said in refused.stderr, refused.stderr
            assert "Traceback" not in refused.stderr

        stopped = topo("stop", procs_id, threads_id, failed, cwd=tmp_path)
        assert stopped.returncode == 1, stopped.stderr  # the first non-zero: the failed run
        assert f"run {failed} has already ended (exit 1)" in stopped.stderr
        for run_id, run_dir in ((procs_id, procs_dir), (threads_id, threads_dir)):
            assert f"✓ run {run_id} stopped: topo stop — exit 0" in stopped.stderr
            assert status(run_dir)["state"] == "ended"
        assert not wait_gone(pids, 20)
        assert topo("ps", "-q", cwd=tmp_path).stdout == ""
    finally:
        _kill(pids)


def test_stop_of_several_runs_goes_on_past_a_name_that_is_no_run(tmp_path: Path) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml")
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "threads")
    pids = run_pids(run_dir)
    try:
        stopped = topo("stop", "nosuchrun", run_id, cwd=tmp_path)
        assert stopped.returncode == 1
        assert (
            "no run 'nosuchrun'" in stopped.stderr and f"✓ run {run_id} stopped" in stopped.stderr
        )
        assert not wait_gone(pids, 20)
    finally:
        _kill(pids)


def _ps_in_a_terminal(cwd: Path, columns: int) -> list[str]:
    e = env(cwd)
    e.pop("COLUMNS")
    child = pexpect.spawn(
        sys.executable,
        ["-m", "topo", "ps", "-a"],
        cwd=str(cwd),
        env=e,
        dimensions=(40, columns),
        encoding="utf-8",
        timeout=60,
    )
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    return str(child.before).replace("\r", "").splitlines()


@pytest.mark.slow
def test_ps_fits_an_80_column_terminal_and_prints_whole_rows_when_piped(tmp_path: Path) -> None:
    file = tmp_path / "with-a-long-program-name.yaml"
    ticker_topology(file)
    file.write_text(file.read_text().replace("name: tickers", "name: acme_distributed_tickers"))
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    try:
        for columns in (80, 60):
            lines = _ps_in_a_terminal(tmp_path, columns)
            assert lines[0].startswith("ID") and lines[1].startswith(run_id), lines
            assert all(len(line) <= columns for line in lines), lines  # no row wraps
            assert "running" in lines[1]
        wide = _ps_in_a_terminal(tmp_path, 200)
        assert wide[1].endswith(str(run_dir.relative_to(tmp_path)))  # room for every column

        piped = topo("ps", cwd=tmp_path).stdout.splitlines()  # (COLUMNS=200 has no say)
        assert piped[0].split() == [
            *"ID NAME BACKEND STATE NODES RESTARTS UPTIME PID".split(),
            "RUN",
            "DIR",
        ]
        assert piped[1].endswith(str(run_dir.relative_to(tmp_path)))
        assert all(line == line.rstrip() for line in piped)
        narrow = topo("ps", cwd=tmp_path, extra={"COLUMNS": "40"}).stdout.splitlines()
        assert narrow[0] == piped[0]  # piped: whole rows, whatever the terminal's width
        assert narrow[1].endswith(str(run_dir.relative_to(tmp_path)))
    finally:
        _kill(pids)


@pytest.mark.slow
def test_logs_until_ends_the_output_at_a_time(tmp_path: Path) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml", count=1)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "threads")
    pids = run_pids(run_dir)
    try:
        wait_until(
            lambda: "t tick 6" in topo("logs", run_id, cwd=tmp_path).stdout,
            30,
            what="'t tick 6' in topo logs",
        )
        assert topo("stop", run_id, cwd=tmp_path).returncode == 0
        stamped = topo("logs", run_id, "-t", cwd=tmp_path).stdout.splitlines()
        ticks = {
            int(m[2]): m[1] for m in (re.search(r"\| (\S+) t tick (\d+)", s) for s in stamped) if m
        }
        until = topo("logs", run_id, "--until", ticks[5], cwd=tmp_path)
        assert until.returncode == 0, until.stderr
        assert _tick_numbers(until.stdout) == [0, 1, 2, 3, 4]  # before that time
        between = topo("logs", run_id, "--since", ticks[2], "--until", ticks[5], cwd=tmp_path)
        assert _tick_numbers(between.stdout) == [2, 3, 4]
        epoch = str(datetime.fromisoformat(ticks[3]).timestamp())
        assert _tick_numbers(topo("logs", run_id, "--until", epoch, cwd=tmp_path).stdout) == [
            0,
            1,
            2,
        ]
        assert topo("logs", run_id, "--until", "1h", cwd=tmp_path).stdout == ""  # 1 h ago
        last = topo("logs", run_id, "--until", ticks[5], "-n", "2", cwd=tmp_path).stdout
        assert _tick_numbers(last) == [3, 4]
        for args, said in [
            (["--until", "soon"], "--until 'soon': give a duration"),
            (["--since", "soon"], "--since 'soon': give a duration"),
            (["-f", "--until", "10m"], "--until ends the output at a time; -f follows"),
        ]:
            refused = topo("logs", run_id, *args, cwd=tmp_path)
            assert refused.returncode == 2 and said in refused.stderr, refused.stderr
    finally:
        _kill(pids)


def _tick_numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"t tick (\d+)", text)]
