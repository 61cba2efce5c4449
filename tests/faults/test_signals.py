"""Faults of the launcher itself: ``kill -9``, SIGTERM, a second Ctrl-C (procs backend)."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_support import descendants, kill_pids, read_pids, topo_run, wait_gone, wait_up

from topo.testing import Lines, wait_until

pytestmark = pytest.mark.slow


def _program(topology: Callable[..., Path], pid_file: Path) -> Path:
    return topology(f"""
        name: faults
        nodes:
          echo: {{target: "fault_nodes:Echo", count: 2}}
          stubborn: {{target: "fault_nodes:Stubborn"}}
          spawner: {{target: "fault_nodes:Spawner", args: {{pid_file: "{pid_file}"}}}}
    """)


def _started(proc: object, tmp_path: Path) -> tuple[list[int], list[int]]:
    """(the processes below topo run: fork server and executables, the node's sleeps)."""
    wait_up(proc)  # type: ignore[arg-type]
    sleeps = read_pids(tmp_path / "pids")
    below = descendants(proc.pid)  # type: ignore[attr-defined]
    assert len(set(below) - set(sleeps)) >= 5, below  # fork server + 4 executables
    return below, sleeps


def test_kill9_of_the_launcher_leaves_nothing_behind(topology: Callable, tmp_path: Path) -> None:
    path = _program(topology, tmp_path / "pids")
    with topo_run(str(path), "--no-live", "--log-dir", str(tmp_path / "runs")) as proc:
        below, sleeps = _started(proc, tmp_path)
        try:
            (status_file,) = (tmp_path / "runs").glob("*-*/status.json")
            socket_dir = json.loads(status_file.read_text())["socket_dir"]
            assert socket_dir and Path(socket_dir).is_dir()
            # Not reaped until the end: a launcher killed and still a zombie (its parent
            # has not waited for it yet) is gone too. The fork server counted it alive and
            # left the socket directory behind (a busy machine's CI run hit this).
            proc.kill()
            assert not wait_gone([*below, *sleeps], 5), "processes outlived the launcher"
            wait_until(
                # (the fork server, which outlives it, removes it: seconds on a busy machine)
                lambda: not Path(socket_dir).exists(),
                30,
                what="the run's socket directory gone",
            )
            proc.wait(10)
        finally:
            kill_pids([*below, *sleeps])


def test_sigterm_exits_143_and_leaves_nothing(topology: Callable, tmp_path: Path) -> None:
    path = _program(topology, tmp_path / "pids")
    with topo_run(
        str(path), "--no-live", "--grace", "1", "--log-dir", str(tmp_path / "runs")
    ) as proc:
        below, sleeps = _started(proc, tmp_path)
        try:
            proc.send_signal(signal.SIGTERM)
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == 143, out
            assert "SIGTERM" in out
            assert not wait_gone([*below, *sleeps], 10)
        finally:
            kill_pids([*below, *sleeps])


def test_second_ctrl_c_kills_at_once(topology: Callable, tmp_path: Path) -> None:
    path = _program(topology, tmp_path / "pids")
    with topo_run(
        str(path), "--no-live", "--grace", "120", "--log-dir", str(tmp_path / "runs")
    ) as proc:
        below, sleeps = _started(proc, tmp_path)
        try:
            assert proc.stdout is not None
            said = Lines(proc.stdout)
            proc.send_signal(signal.SIGINT)
            said.wait_for("Ctrl-C again", 30)  # the first one taken: it says what a second does
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
            took = time.monotonic() - t0
            out = said.wait_closed(30)
            assert proc.returncode == 130, out
            assert took < 10, f"the second Ctrl-C took {took:.1f}s (grace is 120 s)"
            assert not wait_gone([*below, *sleeps], 10)
        finally:
            kill_pids([*below, *sleeps])
