"""A node whose constructor never returns is failed, by name, once its group's
``ready_timeout_s`` passes."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from topo.testing import wait_gone


@pytest.mark.slow
def test_stuck_constructor_fails_the_program_with_the_node_named(
    topo_launch: Callable, topology: Callable
) -> None:
    path = topology("""
        name: stuck
        nodes:
          echo: {target: "fault_nodes:Echo"}
          stuck: {target: "fault_nodes:StuckInit", ready_timeout_s: 2}
    """)
    run = topo_launch(path, "procs", grace_s=1)
    assert run.wait(20) == 1, "the stuck node was not failed within 20 s"
    failure = run.failure
    assert failure is not None and failure.node == "stuck"
    assert "stuck" in failure.message and "did not become ready within" in failure.message
    assert not wait_gone(run.pids(), 15)
