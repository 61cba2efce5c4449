"""A node that captures its state while the program is held and builds it afterwards
(``capture_state``, as the reverb node does with its checkpoint): the snapshot's pause
holds the capture only, the state is of the paused moment, and the program moves while
the state is built."""

from __future__ import annotations

import pickle
from collections.abc import Callable

import pytest

from topo.runtime.errors import PeerUnavailable
from topo.testing import wait_gone, wait_until

PROGRAM = """
    name: capture
    nodes:
      counter:
        target: "topo.nodes:Counter"
      stepper:
        count: 2
        target: "snap_nodes:Capturer"
        args: {counter: "@counter", build_s: 1.5}
"""


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_a_captured_state_is_of_the_paused_moment_and_built_after_it(
    topo_launch: Callable, topology: Callable, backend: str
) -> None:
    run = topo_launch(topology(PROGRAM), backend, ready_timeout=60)
    events: list = []
    run.launcher.add_listener(events.append)
    snap = run.snapshot()
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)

    saved = {n: pickle.loads(snap.state(n)) for n in snap.nodes}
    counted = saved["counter"]["counts"]["steps"]
    # of one moment: the counter's count is the steppers' captured steps
    assert counted == saved["stepper/0"]["steps"] + saved["stepper/1"]["steps"]
    # built after the program was let go: each stepper went on while its state was built
    for node in ("stepper/0", "stepper/1"):
        assert saved[node]["steps_when_built"] > saved[node]["steps"], saved[node]
    # (the pause's length is not asserted: on a loaded machine reaching the pause points
    # alone can take seconds; that the steppers moved while their states were built is
    # what shows the builds came after it)
    [said] = [e.message for e in events if e.kind == "snapshot"]
    assert f"paused {snap.pause_s:.2f}s" in said and ", built after it in " in said, said


@pytest.mark.slow
def test_a_restarted_capturing_node_starts_from_its_built_state(
    topo_launch: Callable, topology: Callable
) -> None:
    run = topo_launch(topology(PROGRAM), "procs", ready_timeout=60)
    answer = run.launcher.restart_node("stepper/0")
    assert answer["ok"], answer
    stepper = run.handle("stepper/0", timeout=60)

    def restored() -> int | None:
        try:
            return stepper.status()["restored_from"]
        except PeerUnavailable:  # a call sent to the attempt the restart ended
            return None

    wait_until(lambda: restored() is not None, 60, what="the restarted stepper")
    assert restored() > 0  # the state it handed over, built after its capture
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)


def test_capture_state_is_not_served_to_peers() -> None:
    from tests.snapshots.snap_nodes import Capturer
    from topo.runtime.server import public_methods

    served = public_methods(Capturer(counter=None))
    assert "capture_state" not in served and "save" in served and "run" not in served
