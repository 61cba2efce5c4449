"""Issue 9 §4: nodes stuck starting are failed by name; a run leaves a record while it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from topo.testing import wait_gone, wait_until

HERE = Path(__file__).resolve().parent  # tests/backends (its bk_* helper modules)
ROOT = HERE.parents[1]


@pytest.mark.slow
def test_node_stuck_in_its_constructor_fails_by_name(
    topo_launch: Callable, topology: Callable, backend: str
) -> None:
    # The deadline must leave the node time to reach its constructor on a busy machine:
    # a Ray actor's process takes seconds to start under load (measured: 3.5 s beside two
    # busy loops), a forked process far less.
    timeout = 12 if backend == "ray" else 4
    path = topology(f"""
        name: stuck
        nodes:
          echo: {{target: "bk_nodes:Echo"}}
          stuck:
            target: "bk_nodes:SlowStart"
            args: {{seconds: 40}}
            ready_timeout_s: {timeout}
    """)
    run = topo_launch(path, backend)
    assert run.wait(60) == 1
    failure = run.failure
    assert failure is not None and failure.node == "stuck"
    assert f"did not become ready within {timeout}s" in failure.message
    # Where it was stuck: shown (threads) or dumped into its log (procs).
    shown = failure.traceback if backend == "threads" else run.log("stuck")
    assert "bk_nodes.py" in shown and "in __init__" in shown, shown
    assert not wait_gone(run.pids(), 15)


@pytest.mark.slow
def test_stuck_node_is_restarted_by_its_policy(topo_launch: Callable, topology: Callable) -> None:
    path = topology("""
        name: stuck_restart
        nodes:
          stuck:
            target: "bk_nodes:SlowStart"
            ready_timeout_s: 1
            restart: {policy: on-failure, max_restarts: 1, backoff: {initial_s: 0.1}}
    """)
    run = topo_launch(path, "procs")
    assert run.wait(30) == 1
    assert run.failure is not None
    assert "failed 2 times" in run.failure.message
    assert "did not become ready within 1s" in run.failure.message


def test_status_file_is_written_while_running(
    topo_launch: Callable, topology: Callable, backend: str
) -> None:
    path = topology("""
        name: live_status
        nodes:
          echo: {target: "bk_nodes:Echo", count: 2}
    """)
    run = topo_launch(path, backend, ready_timeout=60)
    status_file = run.run_dir / "status.json"

    def all_running() -> dict | None:
        if not status_file.exists():
            return None
        status: dict = json.loads(status_file.read_text())
        return status if all(n["state"] == "running" for n in status["nodes"]) else None

    status = wait_until(all_running, 10, what="every node running in status.json")
    assert status.get("state") == "running"
    assert {n["id"]: n["state"] for n in status["nodes"]} == {
        "echo/0": "running",
        "echo/1": "running",
    }
    assert run.stop(timeout=60) == 0
    final = json.loads(status_file.read_text())
    assert final["state"] == "ended" and final["exit_code"] == 0


@pytest.mark.slow
def test_live_table_shows_how_long_a_node_has_been_starting(
    topo_launch: Callable, topology: Callable
) -> None:
    from topo.cli.view import TableView

    path = topology("""
        name: starting
        nodes:
          slow: {target: "bk_nodes:SlowStart", args: {seconds: 5}}
    """)
    run = topo_launch(path, "procs")
    wait_until(lambda: run.launcher.state.nodes["slow"].state == "starting", 30)
    console = Console(record=True, width=120, force_terminal=False)
    view = TableView.__new__(TableView)
    view.source, view.console = run.launcher.state, console
    console.print(view.render())
    assert "starting 0:0" in console.export_text()


@pytest.mark.slow
def test_threads_node_calling_os_exit_leaves_a_record(tmp_path: Path) -> None:
    path = tmp_path / "exiter.yaml"
    path.write_text(
        "name: exiter\n"
        "nodes:\n"
        "  echo: {target: 'bk_nodes:Echo'}\n"
        "  exiter: {target: 'bk_nodes:Exiter', args: {code: 3, delay: 2.0}}\n"
    )
    env = {"PYTHONPATH": f"{HERE}:{ROOT}"}
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from topo.cli import main; main()",
            "run",
            str(path),
            "-b",
            "threads",
            "--no-live",
            "--run-dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **env},
        cwd=ROOT,
    )
    assert result.returncode == 3, result.stderr
    crash = (tmp_path / "run" / "crash.log").read_text()
    assert "node exiter called os._exit(3)" in crash
    status = json.loads((tmp_path / "run" / "status.json").read_text())
    assert status["state"] == "running"  # the launcher never got to finish it
    assert {n["id"] for n in status["nodes"]} == {"echo", "exiter"}
    assert status["socket_dir"] and not Path(status["socket_dir"]).exists()


def test_threads_run_leaves_no_empty_crash_log(topo_launch: Callable, topology: Callable) -> None:
    path = topology("""
        name: clean
        nodes:
          echo: {target: "bk_nodes:Echo"}
    """)
    run = topo_launch(path, "threads", ready_timeout=60)
    assert run.stop(timeout=30) == 0
    assert not (run.run_dir / "crash.log").exists()


@pytest.mark.slow
def test_a_stuck_node_whose_exit_is_never_reported_still_fails_the_run(
    topo_launch: Callable, topology: Callable
) -> None:
    from bk_backends import LosesKilledExits

    from topo.supervisor.deadlines import EXIT_REPORT_S

    path = topology("""
        name: unreported
        nodes:
          stuck:
            target: "bk_nodes:SlowStart"
            args: {seconds: 60}
            ready_timeout_s: 1
    """)
    run = topo_launch(path, LosesKilledExits())
    assert run.wait(EXIT_REPORT_S + 20) == 1, "the run waited for an exit that never came"
    failure = run.failure
    assert failure is not None and failure.node == "stuck"
    assert "did not become ready within 1s" in failure.message
    assert "its exit was not reported" in run.log("stuck")
