"""A node's own child processes (``multiprocessing`` with the fork, spawn and forkserver
contexts, ``subprocess.Popen``) do not hide the node's exit on procs: a crash is seen at
once, named, shown and acted on; a clean stop is not a kill; and the children end with
the node. Before the fork server watched its executables by pid, a fork-context child
kept the node's exit pipe open and the crash was never noticed."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_support import kill_pids, read_pids, topo_run, wait_gone

HOWS = ["fork", "spawn", "forkserver", "popen"]


def _program(topology: Callable[..., Path], pid_file: Path, how: str, crash: bool) -> Path:
    return topology(f"""
        name: with_child
        nodes:
          parent:
            target: "fault_nodes:WithChild"
            args: {{how: {how}, pid_file: "{pid_file}", crash: {str(crash).lower()}}}
            restart: {{policy: on-failure, max_restarts: 1, backoff: {{initial_s: 0.05}}}}
          echo: {{target: "fault_nodes:Echo"}}
    """)


@pytest.mark.parametrize("how", HOWS)
def test_a_node_with_a_child_that_raises_is_restarted_then_fails_the_run(
    topo_launch: Callable, topology: Callable, tmp_path: Path, how: str
) -> None:
    pid_file = tmp_path / "pids"
    run = topo_launch(_program(topology, pid_file, how, crash=True), "procs")
    code = run.wait(45)
    pids = read_pids(pid_file, timeout=1) if pid_file.exists() else []
    try:
        assert code == 1, f"the crash beside a {how} child was not seen"
        failure = run.failure
        assert failure is not None and failure.node == "parent"
        assert "failed 2 times" in failure.message  # the restart policy restarted it once
        assert "RuntimeError: crashed beside its child" in failure.traceback
        assert len(pids) == 4, pids  # node and child, of each attempt
        assert not wait_gone(pids, 10), "a child of the node outlived it"
    finally:
        kill_pids(pids)


@pytest.mark.parametrize("how", HOWS)
def test_a_node_with_a_child_stops_cleanly_within_the_grace(
    topo_launch: Callable, topology: Callable, tmp_path: Path, how: str
) -> None:
    pid_file = tmp_path / "pids"
    run = topo_launch(_program(topology, pid_file, how, crash=False), "procs", grace_s=10)
    assert run.wait_ready(60)
    pids = read_pids(pid_file)
    try:
        begun = time.monotonic()
        assert run.stop(timeout=60) == 0
        took = time.monotonic() - begun
        assert took < 8, f"stopping took {took:.1f}s: the node waited out the grace"
        states = {n.id: n.state for n in run.status()}
        assert "killed" not in states.values(), states
        assert not any("killed" in w for w in run.launcher.state.warnings), (
            run.launcher.state.warnings
        )
        assert not wait_gone(pids, 10), "a child of the node outlived the run"
    finally:
        kill_pids(pids)


@pytest.mark.slow
def test_topo_run_shows_the_crash_of_a_node_with_a_fork_child(
    topology: Callable, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    path = _program(topology, pid_file, "fork", crash=True)
    with topo_run(str(path), "--no-live", "--log-dir", str(tmp_path / "runs")) as proc:
        out, _ = proc.communicate(timeout=60)
        pids = read_pids(pid_file, timeout=1)
        try:
            assert proc.returncode == 1, out
            assert "node parent" in out and "failed 2 times" in out, out
            assert "RuntimeError: crashed beside its child" in out, out
            assert not wait_gone(pids, 10), "a child of the node outlived topo run"
        finally:
            kill_pids(pids)
