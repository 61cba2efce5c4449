"""``topo stacks RUN [NODE...]``: every thread's stack of a live run's nodes, taken without
stopping them -- a node whose only handler thread is stuck answers too, its stack naming
the handler's line; a node that does not exist, or a run that ended, is one clear error."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo.rundir.layout import log_path
from topo.runs.control import request
from topo.testing import wait_for_text, wait_until

ROOT = Path(__file__).resolve().parents[2]
HOLDER = """
    name: stacks
    nodes:
      counter: {target: "topo.nodes:Counter"}
      stepper:
        target: "snap_nodes:Holder"
        args: {counter: "@counter", sleep_s: 0.005}
        rpc: {threads: 1}
"""


def _stacks(run: Any, nodes: list[str]) -> dict[str, Any]:
    control = json.loads((run.run_dir / "status.json").read_text())["control"]
    return request(run.run_dir, control, {"op": "stacks", "nodes": nodes}, timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_a_stuck_handler_is_named_and_the_node_goes_on(
    topo_launch: Callable, topology: Callable, backend: str
) -> None:
    run = topo_launch(topology(HOLDER), backend, ready_timeout=60)
    stepper = run.handle("stepper", timeout=30)
    # its one handler thread held until the process ends (the caller gives up after 3 s)
    run.handle("stepper", timeout=3).submit("hold")
    wait_for_text(log_path(run.run_dir, "stepper"), "holding", 60)
    steps = run.handle("counter", timeout=30).get_counts()["steps"]

    answer = _stacks(run, ["stepper"])
    assert answer["ok"], answer
    assert list(answer["stacks"]) == ["stepper"]
    text = answer["stacks"]["stepper"]
    assert "snap_nodes.py" in text and ", in hold\n    threading.Event().wait()" in text, text
    assert ", in run\n" in text, text  # its loop's thread, between two steps
    # nothing was stopped: the loop goes on
    wait_until(lambda: run.handle("counter", timeout=30).get_counts()["steps"] > steps + 10, 30)
    every = _stacks(run, [])
    assert every["ok"] and set(every["stacks"]) == {"counter", "stepper"}, every
    assert "process " in every["stacks"]["counter"]
    assert _stacks(run, ["nope"]) == {
        "ok": False,
        "error": "the program has no node 'nope' (its nodes: counter, stepper)",
    }
    del stepper
    assert run.stop(timeout=60) == 0


@pytest.mark.slow
def test_topo_stacks_prints_the_nodes_stacks_and_refuses_what_it_cannot_show(
    tmp_path: Path,
) -> None:
    topology = tmp_path / "stacks.yaml"
    topology.write_text(
        HOLDER.replace("snap_nodes:", "tests.snapshots.snap_nodes:").replace("\n    ", "\n")
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "TOPO_HOME": str(tmp_path)}

    def topo(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "topo", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    started = topo("run", str(topology), "-d")
    assert started.returncode == 0, started.stderr
    run_id = started.stdout.split()[0]
    try:
        shown = topo("stacks", run_id, "stepper")
        assert shown.returncode == 0, shown.stderr
        assert "── stepper ──" in shown.stderr
        assert 'thread "topo-node-stepper"' in shown.stdout and ", in run\n" in shown.stdout
        # topo's housekeeping is named, not shown; --all shows it
        assert "topo-stop-watch" in shown.stdout and "(topo stacks --all shows them)" in (
            shown.stdout
        )
        assert 'thread "topo-stop-watch"' not in shown.stdout
        every = topo("stacks", run_id, "stepper", "--all")
        assert every.returncode == 0, every.stderr
        assert 'thread "topo-stop-watch" (daemon)' in every.stdout
        assert "--all shows them" not in every.stdout
        wrong = topo("stacks", run_id, "nope")
        assert wrong.returncode == 1
        assert "error: the program has no node 'nope' (its nodes: counter, stepper)" in (
            wrong.stderr
        )
    finally:
        assert topo("stop", run_id).returncode == 0
    ended = topo("stacks", run_id)
    assert ended.returncode == 1 and "is not running" in ended.stderr, ended.stderr
