"""``topo restart RUN NODE`` (and the dashboard's Restart, the same control request) hands
the node's live state over to its next start, as ``topo apply`` does, instead of rolling
it back to the newest snapshot; ``--fresh`` starts it with none; a node with no live
state (down) restores the newest snapshot, and the answer says which and from when."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.snapshots.test_snapshots import states
from topo.rundir.layout import log_path
from topo.runs.control import request
from topo.testing import wait_for_text, wait_until

ROOT = Path(__file__).resolve().parents[2]
STEPPER = """
    name: snap
    nodes:
      counter: {{target: "topo.nodes:Counter"}}
      stepper:
        target: "snap_nodes:{cls}"
        args: {{counter: "@counter", sleep_s: 0.005}}
        restart: {{policy: on-failure, max_restarts: 3, backoff: {{initial_s: {backoff}}}}}
"""


def _restart(run: Any, node: str, fresh: bool = False) -> dict[str, Any]:
    control = json.loads((run.run_dir / "status.json").read_text())["control"]
    message = {"op": "restart", "node": node, "by": "a test", "fresh": fresh}
    return request(run.run_dir, control, message, timeout=60)


def _status(run: Any, node: str, old_pid: int) -> dict[str, Any] | None:
    """The node's status once it runs in another process than ``old_pid``."""
    try:
        found = dict(run.handle(node, timeout=10).status())
    except Exception:
        return None
    return found if found["pid"] != old_pid else None


@pytest.mark.slow
def test_a_restarted_node_keeps_its_live_state_or_starts_fresh(
    topo_launch: Callable, topology: Callable
) -> None:
    run = topo_launch(topology(STEPPER.format(cls="Stepper", backoff=0.2)), "procs")
    assert run.wait_ready(60)
    stepper = run.handle("stepper", timeout=30)
    wait_until(lambda: stepper.status()["steps"] > 20, 60)
    snapped = run.snapshot()  # an older state the restart must not roll back to
    first = stepper.status()
    wait_until(lambda: stepper.status()["steps"] > first["steps"] + 200, 60)
    before = stepper.status()["steps"]
    answer = _restart(run, "stepper")
    assert answer["ok"] and re.fullmatch(
        r"stepper keeps its live state \([\d.]+ (B|KiB), saved just now\)", answer["message"]
    ), answer
    after = wait_until(lambda: _status(run, "stepper", first["pid"]), 60)
    assert after["restored_from"] >= before > states(snapped)["stepper"]["steps"]
    fresh = _restart(run, "stepper", fresh=True)
    assert fresh["ok"] and fresh["message"] == "stepper starts fresh (--fresh)", fresh
    again = wait_until(lambda: _status(run, "stepper", after["pid"]), 60)
    assert again["restored_from"] is None  # nothing restored: its random stream starts over
    assert again["first_draw"] == random.Random(1234).random()


@pytest.mark.slow
def test_a_node_whose_threads_are_all_busy_restarts_within_the_pause_bound(
    topo_launch: Callable, topology: Callable
) -> None:
    """The launcher's pause and save are served beside the busy handler thread (not
    queued behind it until their deadline): the restart takes the node's state and
    goes on at once."""
    text = STEPPER.format(cls="Holder", backoff=0.2) + (
        "        rpc: {threads: 1}\n    snapshots: {pause_timeout_s: 1}\n"
    )
    run = topo_launch(topology(text), "procs")
    assert run.wait_ready(60)
    holder = run.handle("stepper", timeout=30)
    first = holder.status()
    # the caller gives up after 3 s; the node's one thread holds on until its process ends
    run.handle("stepper", timeout=3).submit("hold")
    wait_for_text(log_path(run.run_dir, "stepper"), "holding", 60)
    asked = time.monotonic()
    answer = _restart(run, "stepper")
    waited = time.monotonic() - asked
    assert answer["ok"], answer
    assert re.fullmatch(
        r"stepper keeps its live state \([\d.]+ (B|KiB), saved just now\)", answer["message"]
    ), answer
    # (before: the pause waited behind the held call until its 31 s deadline)
    assert waited < 20, f"the restart was answered after {waited:.1f} s"
    after = wait_until(lambda: _status(run, "stepper", first["pid"]), 120)
    assert after["restored_from"] is not None


@pytest.mark.slow
def test_a_loop_not_at_a_pause_point_within_the_bound_is_named_in_the_answer(
    topo_launch: Callable, topology: Callable
) -> None:
    """A step longer than the pause bound: the state is taken as it is when the bound
    runs out (as a snapshot takes it) and the answer says which thread was not paused."""
    text = STEPPER.format(cls="Dozer", backoff=0.2) + "    snapshots: {pause_timeout_s: 0.5}\n"
    run = topo_launch(topology(text), "procs")
    assert run.wait_ready(60)
    first = wait_until(lambda: (s := run.handle("stepper").status())["dozing"] and s, 30)
    answer = _restart(run, "stepper")
    assert answer["ok"], answer
    assert re.fullmatch(
        r"stepper keeps its live state \([\d.]+ (B|KiB), saved just now, "
        r"\S+ still busy: not paused\)",
        answer["message"],
    ), answer
    after = wait_until(lambda: _status(run, "stepper", first["pid"]), 60)
    assert after["restored_from"] == 1


@pytest.mark.slow
def test_a_down_node_restores_the_newest_snapshot_and_says_which(
    topo_launch: Callable, topology: Callable
) -> None:
    # a crash waits 60 s before its restart: the asked restart comes first
    run = topo_launch(topology(STEPPER.format(cls="Crasher", backoff=60)), "procs")
    assert run.wait_ready(60)
    crasher = run.handle("stepper", timeout=30)
    wait_until(lambda: crasher.status()["steps"] > 20, 60)
    snap = run.snapshot()
    first_pid = crasher.status()["pid"]
    crasher.fail()
    wait_until(lambda: run.launcher.state.nodes["stepper"].state == "restarting", 60)
    answer = _restart(run, "stepper")
    assert answer["ok"], answer
    assert re.fullmatch(
        rf"stepper restores snapshot {snap.number}, taken \d+s ago \(it is restarting: no "
        r"live state to hand over\)",
        answer["message"],
    ), answer
    after = wait_until(lambda: _status(run, "stepper", first_pid), 60)
    assert after["restored_from"] == states(snap)["stepper"]["steps"]


@pytest.mark.slow
def test_topo_restart_says_what_the_node_starts_from(tmp_path: Path) -> None:
    topology = tmp_path / "snap.yaml"
    text = STEPPER.format(cls="Stepper", backoff=0.2)
    topology.write_text(text.replace("snap_nodes:", "tests.snapshots.snap_nodes:"))
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
        done = topo("restart", run_id, "stepper")
        assert done.returncode == 0, done.stderr
        assert "↻ restarting stepper of run" in done.stderr
        assert "stepper keeps its live state (" in done.stderr
    finally:
        assert topo("stop", run_id).returncode == 0
