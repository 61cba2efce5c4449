"""A node still running when the stop's grace period ends has its threads' stacks dumped
into its log before it is killed, and the run's warning says where to look (procs: the
process's faulthandler; threads: the node's threads, written by the launcher)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

import pytest

from topo.testing import wait_gone


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_a_node_that_outlives_the_grace_has_its_stacks_in_its_log(
    topo_launch: Callable, topology: Callable, backend: str, capsys: pytest.CaptureFixture
) -> None:
    # On threads the node ends by itself 6 s after the stop (no kill ends a thread), with
    # an exception: what it says then must not land in this process's output.
    path = topology("""
        name: late
        nodes:
          echo: {target: "fault_nodes:Echo"}
          stubborn: {target: "fault_nodes:Stubborn", args: {for_s: 6, then_raise: true}}
    """)
    before = set(threading.enumerate())  # another test's node thread may live on here
    run = topo_launch(path, backend, grace_s=1)
    assert run.wait_ready(60)
    pids = run.pids() if backend == "procs" else []
    assert run.stop(timeout=60) is not None
    assert not wait_gone(pids, 15)
    mine = set(threading.enumerate()) - before
    for thread in [t for t in mine if t.name == "topo-node-stubborn"]:
        thread.join(60)
        assert not thread.is_alive()
    assert "stubborn to the end" not in capsys.readouterr().out  # nor another test's
    log = run.log("stubborn")
    # the dump: the node's thread, in the loop that ignores the stop
    assert 'File "' in log and "fault_nodes.py" in log and "in run" in log, log[-2000:]
    assert "fault_nodes.py" not in run.log("echo")  # it stopped in time: nothing dumped
    warnings = json.loads((run.run_dir / "status.json").read_text())["warnings"]
    assert any("grace period" in w and "logs of stubborn" in w for w in warnings), warnings
