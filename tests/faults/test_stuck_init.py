"""A node whose constructor never returns is failed, by name, once its group's
``ready_timeout_s`` passes; a node calling it is not held past the stop by it."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from topo.rundir.layout import log_path
from topo.testing import wait_for_text, wait_gone


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


@pytest.mark.slow
def test_a_call_to_a_peer_that_never_registered_ends_at_the_stop(
    topo_launch: Callable, topology: Callable
) -> None:
    """The caller waits for the peer's address within its call's deadline (2 minutes
    here) -- until the program stops: then it gives up at once, not at its deadline
    (it was killed at the grace's end)."""
    path = topology("""
        name: never_there
        nodes:
          peer: {target: "fault_nodes:StuckInit", ready_timeout_s: 600}
          caller:
            target: "fault_nodes:Caller"
            args: {peer: "@peer"}
            rpc: {deadline_s: 120}
    """)
    run = topo_launch(path, "procs", grace_s=8)
    wait_for_text(log_path(run.run_dir, "caller"), "calling the peer", 60)
    run.stop(timeout=60)
    status = json.loads((run.run_dir / "status.json").read_text())
    killed = [w for w in status["warnings"] if "grace period" in w]
    # the peer, stuck in its constructor, is killed at the grace's end; the caller is not
    assert killed and all("caller" not in w for w in killed), status["warnings"]
    said = log_path(run.run_dir, "caller").read_text()
    # one line, no traceback: a peer not up at the stop is no error of the caller's
    assert "stopped while calling a peer: " in said and "the program is stopping" in said
    assert "Traceback" not in said, said
    assert not wait_gone(run.pids(), 15)
