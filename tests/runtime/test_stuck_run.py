"""A node whose eight handler threads are all stuck, run by the launcher (procs): flagged
in status.json and on the terminal with the stuck methods, a new call fails with a clear
error before its deadline, and the stop still ends within the grace period (procs and
threads).

The node code is in this module (``test_stuck_run:...``): pytest puts this directory on
``sys.path``, and the procs fork server gets the launcher's ``sys.path``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo.backends.base import Event
from topo.rundir.layout import log_path
from topo.runtime.errors import NodeBusy
from topo.testing import wait_gone, wait_until

GRACE_S = 5.0


class Sleeper:
    """``hold`` does not return within the test (it is not interruptible)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def hold(self) -> None:
        time.sleep(self.seconds)

    def ping(self) -> str:
        return "pong"


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_eight_stuck_handlers_flagged_and_stop_within_grace(
    topo_launch: Callable, tmp_path: Path, backend: str
) -> None:
    from topo.cli.view import status_line

    path = tmp_path / "stuck.yaml"
    path.write_text(
        "name: stuck\nnodes:\n  sleeper: {target: 'test_stuck_run:Sleeper', rpc: {threads: 8}, "
        # threads: the stuck handlers are threads of this process, left to end by themselves
        f"args: {{seconds: {600 if backend == 'procs' else 40}}}}}\n"
    )
    run = topo_launch(path, backend, grace_s=GRACE_S)
    events: list[Event] = []
    run.launcher.add_listener(events.append)
    assert run.wait_ready(60)
    h = run.handle("sleeper", 120.0)
    assert h.ping() == "pong"
    held = [h.futures.hold() for _ in range(8)]

    # Flagged (after the pool's 5 s) in status.json, with the methods and their stacks.
    def flagged() -> dict[str, Any] | None:
        status: dict[str, Any] = json.loads((run.run_dir / "status.json").read_text())
        return status if status["nodes"][0]["busy"] else None

    status = wait_until(flagged, 30, what="the node flagged busy in status.json")
    busy = status["nodes"][0]["busy"]
    assert busy["methods"] == ["hold"] * 8 and busy["threads"] == 8
    assert "time.sleep(self.seconds)" in busy["stacks"]
    assert status["nodes"][0]["state"] == "running"
    # ...in the node's log, with the stacks...
    log = log_path(run.run_dir, "sleeper").read_text()
    assert "sleeper answers no calls" in log and "time.sleep(self.seconds)" in log
    # ...and on the terminal, a warning line naming the node.
    lines = [status_line(e, run.launcher.state) for e in events if e.kind == "busy"]
    text = [str(line) for line in lines if line is not None]
    assert any("sleeper answers no calls" in t and "hold ×8" in t for t in text), text
    # A new call fails with the clear error before its deadline.
    start = time.monotonic()
    with pytest.raises(NodeBusy, match="hold ×8"):
        h.with_timeout(3.0).ping()
    assert time.monotonic() - start < 3.0
    # The stop ends within the grace: the node stops, it is not killed.
    start = time.monotonic()
    assert run.stop(timeout=60) == 0
    assert time.monotonic() - start < GRACE_S
    assert run.launcher.state.nodes["sleeper"].state == "finished"  # a clean stop
    assert [e.state for e in run.launcher.state.exes.values()] == ["stopped"]  # not "killed"
    assert not any("killed" in w for w in run.launcher.state.warnings)
    assert not any(f.done() for f in held)  # not answered (their deadline is 120 s)
    assert not wait_gone(run.pids(), 15)
