"""On threads, nothing a node started outlives it: not when its attempt fails and it is
restarted, not when the launcher is killed (``kill -9``) or a node ends it (``os._exit``).

The node (``fault_nodes.Family``) starts ``sleep 600`` twice (``Popen``, once detached
with ``setsid``) and a ``multiprocessing`` child (fork context); every pid is checked by
pid, and the run's socket directory must be gone too.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from fault_support import kill_pids, read_pids, topo_run, wait_gone, wait_up

from topo.testing import alive, wait_until


def _family(topology: Callable[..., Path], pid_file: Path, **args: object) -> Path:
    extra = "".join(f", {k}: {json.dumps(v)}" for k, v in args.items())
    return topology(f"""
        name: family
        nodes:
          family:
            target: "fault_nodes:Family"
            args: {{pid_file: "{pid_file}"{extra}}}
            restart: {{policy: on-failure, max_restarts: 2, backoff: {{initial_s: 0.05}}}}
          echo: {{target: "fault_nodes:Echo"}}
    """)


def _socket_dir(runs: Path) -> Path:
    (status,) = runs.glob("*-*/status.json")
    return Path(json.loads(status.read_text())["socket_dir"])


def test_a_failed_attempt_takes_its_processes_with_it(
    topo_launch: Callable, topology: Callable, tmp_path: Path
) -> None:
    pids = tmp_path / "pids"
    run = topo_launch(_family(topology, pids, fail_first=True), "threads", ready_timeout=60)
    first: list[int] = []
    second: list[int] = []
    try:
        first = read_pids(Path(f"{pids}.0"))
        second = read_pids(Path(f"{pids}.1"))  # the restarted attempt is up
        assert not wait_gone(first, 10), "the failed attempt's processes outlived it"
        assert run.handle("family", timeout=30).pids() == second
        assert alive(second) == second and run.exit_code is None, run.failure
        assert run.stop(timeout=60) == 0
        assert not wait_gone(second, 10), "the node's processes outlived the run"
    finally:
        kill_pids([*first, *second])


@pytest.mark.slow
@pytest.mark.parametrize("how", ["kill -9", "os._exit"])
def test_the_launchers_death_takes_the_nodes_processes_and_socket_dir(
    topology: Callable, tmp_path: Path, how: str
) -> None:
    pids, runs = tmp_path / "pids", tmp_path / "runs"
    args = {"exit_after_s": 3.0} if how == "os._exit" else {}
    path = _family(topology, pids, **args)
    family: list[int] = []
    with topo_run(str(path), "-b", "threads", "--no-live", "--log-dir", str(runs)) as proc:
        try:
            wait_up(proc)
            family = read_pids(Path(f"{pids}.0"))
            sockets = _socket_dir(runs)
            assert sockets.is_dir() and alive(family) == family
            if how == "kill -9":
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(30)
            assert not wait_gone(family, 10), f"the nodes' processes outlived {how}"
            wait_until(
                lambda: not sockets.exists(), 10, what="the launcher's socket directory gone"
            )
        finally:
            kill_pids(family)


def test_a_forked_child_that_exits_is_not_the_launcher_ending(
    topo_launch: Callable, topology: Callable, tmp_path: Path
) -> None:
    path = topology("""
        name: forks
        nodes:
          forker: {target: "fault_nodes:ForkChild"}
          echo: {target: "fault_nodes:Echo"}
    """)
    run = topo_launch(path, "threads", ready_timeout=60)
    assert run.handle("forker", timeout=30).ping() == 0  # the child ended with os._exit(0)
    sockets = _socket_dir(tmp_path / "runs")
    assert sockets.is_dir(), "the child's exit removed the run's socket directory"
    assert run.handle("echo", timeout=10).ping() == os.getpid()
    crash = run.launcher.state.run_dir / "crash.log"
    assert not crash.exists() or "os._exit" not in crash.read_text(), crash.read_text()
    assert run.stop(timeout=60) == 0
