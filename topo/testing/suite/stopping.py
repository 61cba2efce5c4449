"""Conformance: a stop asks every node to end and waits the grace period; a node that
ignores it is killed once the grace is over, the run still ends with exit 0 (a warning
names the grace), and no process is left."""

from __future__ import annotations

import time

from topo.testing.suite.harness import NODES, Harness, status

STUBBORN = f"""
name: stubborn
nodes:
  stubborn: {{target: "{NODES}:Stubborn"}}
  echo: {{target: "{NODES}:Echo"}}
"""


class Stopping:
    """Stop within the grace, kill after it."""

    def test_a_node_that_ignores_the_stop_is_killed_after_the_grace(self, suite: Harness) -> None:
        run = suite.launch(suite.write(STUBBORN), grace_s=1.0)
        pids = suite.node_pids(run)
        began = time.monotonic()
        assert run.stop(timeout=60) == 0
        took = time.monotonic() - began
        assert took >= 1.0, f"stopped in {took:.2f}s: the stubborn node was not given its grace"
        warned = [w for w in status(run.run_dir)["warnings"] if "grace period" in w]
        assert warned and "killed 1 executable(s)" in warned[0], warned  # the stubborn one
        suite.assert_nothing_left(run, pids)
