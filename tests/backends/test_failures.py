"""Node failures: exceptions, kill -9 of a node process, restarts, max_restarts."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

from topo.testing import wait_gone


def test_node_raising_fails_the_program(
    topo_launch: Callable, topology: Callable, backend: str
) -> None:
    path = topology("""
        name: crash
        nodes:
          echo: {target: "bk_nodes:Echo"}
          crasher: {target: "bk_nodes:Crasher", args: {message: boom-4711}}
    """)
    run = topo_launch(path, backend)
    assert run.wait(60) == 1
    failure = run.failure
    assert failure is not None and failure.node == "crasher"
    assert "raised an exception" in failure.message
    assert "ValueError: boom-4711" in failure.traceback
    assert "in run" in failure.traceback
    log = run.log("crasher")  # output and the traceback both end up in the node's log
    assert "about to fail: boom-4711" in log and "ValueError: boom-4711" in log
    assert not wait_gone(run.pids(), 15)


def _servers(topology: Callable, restart: str = "") -> object:
    return topology(f"""
        name: servers
        nodes:
          echo:
            target: "bk_nodes:Echo"
            count: 2
            {restart}
    """)


def test_kill9_of_a_node_stops_the_program(topo_launch: Callable, topology: Callable) -> None:
    run = topo_launch(_servers(topology), "procs", ready_timeout=60)
    victim = run.launcher.pids()["echo/1"]
    os.kill(victim, signal.SIGKILL)
    assert run.wait(30) == 1
    assert run.failure is not None and run.failure.node == "echo/1"
    assert "SIGKILL" in run.failure.message
    assert not wait_gone(run.pids(), 15)


def test_kill9_restarts_on_failure_and_peers_reach_it_again(
    topo_launch: Callable, topology: Callable
) -> None:
    path = _servers(
        topology, "restart: {policy: on-failure, max_restarts: 3, backoff: {initial_s: 0.05}}"
    )
    run = topo_launch(path, "procs", ready_timeout=60)
    echo = run.handle("echo/1", timeout=30)
    first = echo.whoami()
    os.kill(first[1], signal.SIGKILL)
    deadline = time.monotonic() + 30
    while run.launcher.state.nodes["echo/1"].restarts < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    second = echo.whoami()  # the handle finds the restarted node
    assert second[0] == "echo/1" and second[1] != first[1]
    assert run.launcher.state.nodes["echo/1"].restarts == 1
    assert run.handle("echo/0").ping() == "pong"
    assert run.exit_code is None
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)


def test_max_restarts_exhausted_stops_with_a_message(
    topo_launch: Callable, topology: Callable, backend: str
) -> None:
    path = topology("""
        name: flaky
        nodes:
          echo: {target: "bk_nodes:Echo"}
          crasher:
            target: "bk_nodes:Crasher"
            args: {message: again, delay: 0.05}
            restart: {policy: on-failure, max_restarts: 2, backoff: {initial_s: 0.05}}
    """)
    run = topo_launch(path, backend)
    assert run.wait(60) == 1
    assert run.failure is not None
    assert "failed 3 times" in run.failure.message
    assert "max_restarts: 2" in run.failure.message
    assert run.launcher.state.nodes["crasher"].restarts == 2
    assert run.log("crasher").count("about to fail: again") == 3
    assert not wait_gone(run.pids(), 15)
