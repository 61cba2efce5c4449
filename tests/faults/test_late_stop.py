"""A node still running when the stop's grace period ends has its threads' stacks dumped
into its log before it is killed, and the run's warning says where to look (procs)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from topo.testing import wait_gone


@pytest.mark.slow
def test_a_node_that_outlives_the_grace_has_its_stacks_in_its_log(
    topo_launch: Callable, topology: Callable
) -> None:
    path = topology("""
        name: late
        nodes:
          echo: {target: "fault_nodes:Echo"}
          stubborn: {target: "fault_nodes:Stubborn"}
    """)
    run = topo_launch(path, "procs", grace_s=1)
    assert run.wait_ready(60)
    pids = run.pids()
    assert run.stop(timeout=60) is not None
    assert not wait_gone(pids, 15)
    log = run.log("stubborn")
    # faulthandler's dump: the node's thread, in the loop that ignores the stop.
    assert 'File "' in log and "fault_nodes.py" in log and "in run" in log, log[-2000:]
    assert "fault_nodes.py" not in run.log("echo")  # it stopped in time: nothing dumped
    warnings = json.loads((run.run_dir / "status.json").read_text())["warnings"]
    assert any("grace period" in w and "logs of stubborn" in w for w in warnings), warnings
