"""The procs fork server dies during a run (``kill -9``): its executables are reported
lost, naming it; with restart policies they come back in a new fork server and the run
goes on, without them the run fails at once (exit 1); a fork server that dies before it
is ready fails the run; a stop afterwards waits for nothing that will never come."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
from fault_support import descendants, kill_pids, read_pids, topo_run, wait_gone, wait_up

from topo.api import RunningProgram
from topo.testing import alive, wait_until

RESTART = "restart: {policy: on-failure, max_restarts: 2, backoff: {initial_s: 0.05}}"


def _echoes(topology: Callable[..., Path], restart: str = "", count: int = 4) -> Path:
    return topology(f"""
        name: echoes
        nodes:
          echo:
            target: "fault_nodes:Echo"
            count: {count}
            {restart}
    """)


def _server_pid(run: RunningProgram) -> int:
    (pid,) = run.launcher.backend.helper_pids()
    return pid


def _all_pids(run: RunningProgram, timeout: float = 10) -> dict[str, int]:
    """Executable -> pid, once the pid of every one is known (ready may come first)."""
    want = len(run.program.executables)
    return wait_until(lambda: p if len(p := run.launcher.pids()) >= want else None, timeout)


def _back(run: RunningProgram, old: dict[str, int]) -> dict[str, int] | None:
    """The pids of every executable once each runs again in a new process (None before);
    the run must not end meanwhile."""
    pids = run.launcher.pids()
    states = {n.state for n in run.status()}
    assert run.exit_code is None, run.failure
    back = len(pids) == len(old) and not set(pids.values()) & set(old.values())
    return pids if states == {"running"} and back else None


@pytest.mark.slow
def test_nodes_with_restart_policies_come_back_in_a_new_fork_server(
    topo_launch: Callable, topology: Callable
) -> None:
    run = topo_launch(_echoes(topology, RESTART), "procs", grace_s=5)
    assert run.wait_ready(60)
    server, old = _server_pid(run), _all_pids(run)
    os.kill(server, signal.SIGKILL)
    new = wait_until(lambda: _back(run, old), 45, what=f"the nodes back (were {old})")
    assert not wait_gone(old.values(), 10), "nodes of the dead fork server are still alive"
    assert _server_pid(run) != server and alive([_server_pid(run)])
    assert run.handle("echo/2", timeout=20).ping() == new["echo/2"]
    assert {n.restarts for n in run.status()} == {1}
    assert run.exit_code is None
    begun = time.monotonic()
    assert run.stop(timeout=60) == 0  # every node was recovered
    assert time.monotonic() - begun < 5, "the stop waited for something that never came"
    log = (run.run_dir / "forkserver.log").read_text()
    assert f"the fork server (pid {server}) was killed by SIGKILL" in log


def test_without_restart_policies_the_run_fails_at_once_naming_the_fork_server(
    topology: Callable, tmp_path: Path
) -> None:
    path = _echoes(topology)
    with topo_run(str(path), "--no-live", "--log-dir", str(tmp_path / "runs")) as proc:
        wait_up(proc)
        below = descendants(proc.pid)
        (server,) = [p for p in below if _is_fork_server(p, proc.pid)]
        try:
            os.kill(server, signal.SIGKILL)
            begun = time.monotonic()
            out, _ = proc.communicate(timeout=60)
            took = time.monotonic() - begun
            assert proc.returncode == 1, out
            assert f"the fork server (pid {server}) was killed by SIGKILL" in out, out
            assert "forkserver.log" in out, out
            assert took < 10, f"topo run took {took:.1f}s to end"
            assert not wait_gone(below, 10), "processes outlived topo run"
        finally:
            kill_pids(below)


def _is_fork_server(pid: int, launcher: int) -> bool:
    """``pid`` is the fork server of ``topo run`` (pid ``launcher``), not one of its forks."""
    try:
        proc = psutil.Process(pid)
        title = " ".join(proc.cmdline()).strip()  # its process title, or its command before that
        return proc.ppid() == launcher and (
            "topo.backends.forkserver" in title or title.endswith(" fork server")
        )
    except psutil.Error:
        return False


@pytest.mark.slow
def test_stop_right_after_the_fork_server_died_is_quick(
    topo_launch: Callable, topology: Callable
) -> None:
    run = topo_launch(_echoes(topology, RESTART, count=6), "procs", grace_s=3)
    assert run.wait_ready(60)
    old = list(_all_pids(run).values())
    os.kill(_server_pid(run), signal.SIGKILL)
    wait_until(
        lambda: all(n.restarts == 1 and n.state in ("starting", "running") for n in run.status()),
        20,
        every=0.01,
    )
    begun = time.monotonic()  # every node was restarted: some may not have their pid yet
    assert run.stop(timeout=60) == 0
    took = time.monotonic() - begun
    assert took < 4.5, f"the stop took {took:.1f}s: it waited for pids that never come"
    assert not wait_gone(old, 10)


@pytest.mark.slow
def test_readiness_deadline_holds_for_a_node_restarted_in_a_new_fork_server(
    topo_launch: Callable, topology: Callable
) -> None:
    path = topology("""
        name: stuck_after_restart
        nodes:
          stuck:
            target: "fault_nodes:StuckInit"
            ready_timeout_s: 3
            restart: {policy: on-failure, max_restarts: 2, backoff: {initial_s: 0.05}}
    """)
    run = topo_launch(path, "procs")
    wait_until(run.launcher.pids, 30, what="the node's pid")
    # The attempt running is lost with its fork server: the first, or on a busy machine
    # the second (the first may have missed its 3 s before the kill). The last attempt
    # runs in a new fork server and misses its deadline there.
    os.kill(_server_pid(run), signal.SIGKILL)
    assert run.wait(60) == 1
    assert run.failure is not None and run.failure.node == "stuck"
    assert "failed 3 times" in run.failure.message
    assert "did not become ready within 3s" in run.failure.message
    assert "a new fork server starts" in (run.run_dir / "forkserver.log").read_text()


def test_a_fork_server_dying_before_it_is_ready_fails_the_run(
    topo_launch: Callable, topology: Callable
) -> None:
    path = topology("""
        name: doomed
        nodes:
          nothing:
            target: "fault_server_killer:Nothing"
            restart: {policy: always, max_restarts: 5}
    """)
    run = topo_launch(path, "procs")
    assert run.wait(30) == 1
    failure = run.failure
    assert failure is not None
    assert "the fork server" in failure.message and "exited with code 3" in failure.message
    assert "before it was ready" in failure.message and "forkserver.log" in failure.message
    assert not wait_gone(run.pids(), 10)


def test_what_the_lost_nodes_started_ends_with_them(
    topo_launch: Callable, topology: Callable, tmp_path: Path
) -> None:
    pid_file = tmp_path / "pids"
    path = topology(f"""
        name: lost_children
        nodes:
          parent:
            target: "fault_nodes:WithChild"
            args: {{how: fork, pid_file: "{pid_file}"}}
            {RESTART}
    """)
    run = topo_launch(path, "procs")
    assert run.wait_ready(60)
    first = read_pids(pid_file)  # the node and its multiprocessing child
    later: list[int] = []
    try:
        os.kill(_server_pid(run), signal.SIGKILL)
        assert not wait_gone(first, 10), "the processes of a lost node outlived it"
        later = wait_until(  # its second attempt, in a new fork server
            lambda: p if len(p := read_pids(pid_file)[2:]) >= 2 else None, 45
        )
        assert len(later) == 2 and alive(later) == later
        assert run.exit_code is None
    finally:
        kill_pids([*first, *later, *read_pids(pid_file)])
