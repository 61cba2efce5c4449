"""A node's own child processes end with it: clean stop, SIGTERM and Ctrl-C of ``topo run``.

The node (``fault_nodes.Spawner``) starts ``sleep 600`` twice: once in its process
group, once detached (``setsid``); both pids must be gone after the program stops.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_support import (
    cli_env,
    descendants,
    kill_pids,
    read_pids,
    topo_run,
    wait_gone,
    wait_up,
)

from topo.testing import alive, wait_until


def _spawner(topology: Callable[..., Path], pid_file: Path, extra: str = "") -> Path:
    return topology(f"""
        name: spawner
        nodes:
          spawner: {{target: "fault_nodes:Spawner", args: {{pid_file: "{pid_file}"}}}}
          echo: {{target: "fault_nodes:Echo"}}
          {extra}
    """)


@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_clean_stop_ends_the_processes_a_node_started(
    topo_launch: Callable, topology: Callable, tmp_path: Path, backend: str
) -> None:
    run = topo_launch(_spawner(topology, tmp_path / "pids"), backend, ready_timeout=60)
    sleeps = run.handle("spawner", timeout=30).pids()
    try:
        assert alive(sleeps) == sleeps
        assert run.stop(timeout=60) == 0
        assert not wait_gone(sleeps, 10), "the node's sleep processes outlived the run"
    finally:
        kill_pids(sleeps)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
@pytest.mark.parametrize(
    ("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"]
)
def test_signal_to_topo_run_ends_the_processes_a_node_started(
    topology: Callable, tmp_path: Path, backend: str, sig: int, code: int
) -> None:
    path = _spawner(topology, tmp_path / "pids")
    sleeps: list[int] = []
    with topo_run(
        str(path),
        "--backend",
        backend,
        "--no-live",
        "--grace",
        "5",
        "--log-dir",
        str(tmp_path / "runs"),
    ) as proc:
        try:
            wait_up(proc)
            sleeps = read_pids(tmp_path / "pids")
            below = descendants(proc.pid)
            assert set(sleeps) <= set(below)  # setsid does not re-parent: both are below
            proc.send_signal(sig)
            out, _ = proc.communicate(timeout=60)
            assert proc.returncode == code, out
            assert not wait_gone([*below, *sleeps], 10), "processes outlived topo run"
        finally:
            kill_pids(sleeps)


def test_a_killed_executable_takes_its_processes_and_no_one_elses(
    topo_launch: Callable, topology: Callable
) -> None:
    path = topology("""
        name: two_spawners
        nodes:
          spawner:
            target: "fault_nodes:Spawner"
            count: 2
            restart: {policy: on-failure, max_restarts: 2, backoff: {initial_s: 0.05}}
    """)
    run = topo_launch(path, "procs", ready_timeout=60)
    victim, bystander = (run.handle(f"spawner/{i}", timeout=30).pids() for i in (0, 1))
    restarted: list[int] = []
    try:
        os.kill(run.launcher.pids()["spawner/0"], signal.SIGKILL)
        assert not wait_gone(victim, 10), "a killed node's processes outlived it"
        restarted = run.handle("spawner/0", timeout=30).pids()  # back, with new sleeps
        assert alive(bystander) == bystander, "another node's processes were killed"
        assert alive(restarted) == restarted and run.exit_code is None
    finally:
        kill_pids([*victim, *bystander, *restarted])


def test_threads_clean_up_spares_a_procs_run_of_the_same_process(
    topo_launch: Callable, topology: Callable, tmp_path: Path
) -> None:
    threads_run = topo_launch(_spawner(topology, tmp_path / "pids"), "threads", ready_timeout=60)
    sleeps = threads_run.handle("spawner", timeout=30).pids()
    procs_run = topo_launch(
        topology(
            """
        name: other
        nodes:
          echo: {target: "fault_nodes:Echo"}
    """,
            name="other.yaml",
        ),
        "procs",
        ready_timeout=60,
    )
    try:
        assert threads_run.stop(timeout=60) == 0
        assert not wait_gone(sleeps, 10)  # the threads run's kills have all landed by now
        assert procs_run.handle("echo", timeout=10).ping() > 0
        assert set(alive(procs_run.pids())) == procs_run.pids()
        assert procs_run.exit_code is None, procs_run.failure
    finally:
        kill_pids(sleeps)


def test_threads_clean_up_spares_the_processes_of_the_program_that_launched_it(
    topo_launch: Callable, topology: Callable, tmp_path: Path
) -> None:
    """A test runner or notebook that starts a process while a threads run goes on keeps
    it: only threads born during the run (nodes, their helpers) start the run's processes.
    A node's helper thread that started a process and ended does not hide it."""
    run = topo_launch(
        topology("""
        name: helpers
        nodes:
          spawner: {target: "fault_nodes:ThreadSpawner"}
    """),
        "threads",
        ready_timeout=60,
    )
    nodes = run.handle("spawner", timeout=30).pids()
    host = subprocess.Popen(["sleep", "600"])  # this thread was there before the run
    try:
        seen = run.launcher.backend  # the sampler sees the helper's sleep
        wait_until(lambda: set(nodes) <= {pid for pid, _ in seen._seen}, 30, what="a scan")
        assert run.stop(timeout=60) == 0
        assert not wait_gone(nodes, 10), "a process a node's thread started outlived the run"
        assert host.poll() is None, "the run killed a process of the program that launched it"
    finally:
        host.kill()
        host.wait(10)
        kill_pids(nodes)


LAUNCHER = """
import subprocess, sys, time
import topo
run = topo.launch(sys.argv[1], backend="threads", ready_timeout=60)
nodes = run.handle("spawner", timeout=30).pids()
host = subprocess.Popen(["sleep", "600"])
print(" ".join(map(str, nodes)), host.pid, flush=True)
time.sleep(600)
"""


def test_a_killed_threads_launcher_takes_its_nodes_processes_but_not_its_own(
    topology: Callable, tmp_path: Path
) -> None:
    path = _spawner(topology, tmp_path / "pids")
    script = tmp_path / "launcher.py"
    script.write_text(LAUNCHER)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(path)],
        stdout=subprocess.PIPE,
        text=True,
        env=cli_env(),
        cwd=tmp_path,
    )
    assert proc.stdout is not None
    *nodes, host = (int(p) for p in proc.stdout.readline().split())
    below = descendants(proc.pid)
    try:
        proc.kill()
        proc.wait(10)
        assert not wait_gone(nodes, 10), "the guard left a node's process behind"
        assert alive([host]) == [host], "the guard killed the launching program's own process"
    finally:
        kill_pids([*below, *nodes, host])
        assert not wait_gone([*below, *nodes, host], 10)
