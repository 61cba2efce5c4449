"""PyNodes, stopping and waiting: lp.stop from a node, wait() and node failures, waiting
on labels, stop handlers, exceptions raised while stopping."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from lp_nodes import (
    BrokenInit,
    Handlers,
    NodeError,
    RaiseOnStop,
    Runner,
    Terminated,
    WaitTimeout,
    block,
    block_on_event,
    checkpoint_on_stop,
    fail,
    fail_custom,
    noop,
    returns,
    stop_after,
    stop_when_ready,
)
from lp_support import Launch

import topo.launchpad as lp
from topo.testing import wait_until


def test_py_nodes_run_their_function_and_the_program_ends(lp_launch: Launch) -> None:
    program = lp.Program("py")
    program.add_node(lp.PyNode(returns, 42), label="returns")
    program.add_node(lp.PyNode(noop), label="noop")
    launched = lp_launch(program)
    assert launched.wait(timeout=60) == 0
    assert {s.state for s in launched.run.status()} == {"finished"}


def test_py_class_node_calls_run(lp_launch: Launch) -> None:
    program = lp.Program("pyclass")
    program.add_node(lp.PyClassNode(Runner), label="runner")
    program.add_node(lp.PyNode(stop_after, 0.2), label="stopper")
    launched = lp_launch(program)
    assert launched.wait(timeout=60) == 0


def test_lp_stop_in_a_node_ends_wait(lp_launch: Launch) -> None:
    program = lp.Program("stopping")
    with program.group("block"):
        program.add_node(lp.PyNode(block))
        program.add_node(lp.PyNode(block_on_event))
    program.add_node(lp.CourierNode(WaitTimeout), label="timeout")
    program.add_node(lp.PyNode(stop_after, 0.3), label="stopper")
    launched = lp_launch(program)
    started = time.monotonic()
    assert launched.wait(timeout=60) == 0
    assert time.monotonic() - started < 30
    assert "lp.stop()" in launched.run.launcher.state.stop_reason


def test_wait_for_stop_and_stop_event_inside_nodes(lp_launch: Launch) -> None:
    program = lp.Program("waiting")
    handle = program.add_node(lp.CourierNode(WaitTimeout), label="waiter")
    lp_launch(program)
    assert handle is not None
    client = handle.dereference()
    wait_until(lambda: client.early() is not None, 30, what="wait_for_stop(0.05) to return")
    assert client.early() is False  # wait_for_stop(0.05) timed out: still running
    assert client.stopping() is False


def test_program_stopper(lp_launch: Launch, launch_type: str) -> None:
    def use(stopper: object) -> None:
        stopper()  # type: ignore[operator]

    program = lp.Program("stopper")
    with program.group("block"):
        program.add_node(lp.PyNode(block))
    with program.group("stop"):
        program.add_node(lp.PyNode(use, lp.make_program_stopper(launch_type)))
    assert lp_launch(program).wait(timeout=60) == 0


def test_wait_reraises_a_node_failure(lp_launch: Launch) -> None:
    program = lp.Program("failing")
    program.add_node(lp.PyNode(block), label="block")
    program.add_node(lp.PyNode(fail, "Launchpad has stopped working"), label="fail")
    launched = lp_launch(program)
    with pytest.raises(ValueError, match=r"^Launchpad has stopped working$") as info:
        launched.wait(timeout=60)
    assert getattr(info.value, "node_id", None) == "fail"
    cause = info.value.__cause__
    assert isinstance(cause, lp.NodeFailure) and cause.node_id == "fail"
    assert "in fail" in cause.traceback and "ValueError" in cause.traceback
    assert launched.wait(timeout=60, raise_error=False) == 1


def test_a_failure_of_a_user_exception_type_keeps_its_type(lp_launch: Launch) -> None:
    program = lp.Program("custom")
    program.add_node(lp.PyNode(fail_custom), label="custom")
    launched = lp_launch(program)
    with pytest.raises(NodeError, match=r"^custom failure$") as info:
        launched.wait(timeout=60)
    assert getattr(info.value, "node_id", None) == "custom"


def test_wait_on_labels_returns_while_others_serve(lp_launch: Launch) -> None:
    program = lp.Program("labels")
    with program.group("worker"):
        program.add_node(lp.PyNode(noop))
        program.add_node(lp.PyNode(returns, 1))
    daemon = program.add_node(lp.CourierNode(Runner), label="daemon")
    launched = lp_launch(program)
    assert launched.wait(labels_to_wait_on=["worker"], timeout=60) is None
    assert launched.run.exit_code is None
    assert daemon is not None
    client = daemon.dereference()
    # its run() may start after the workers ended
    wait_until(lambda: client.runs() > 0, 30, what="the daemon's run()")
    assert client.runs() == 1  # still serving, run() called once
    with pytest.raises(ValueError, match="no group labelled 'nobody'"):
        launched.wait(["nobody"])


def test_wait_on_labels_sees_a_failure_elsewhere(lp_launch: Launch) -> None:
    program = lp.Program("elsewhere")
    program.add_node(lp.PyNode(block), label="main")
    program.add_node(lp.PyNode(fail), label="daemon")
    launched = lp_launch(program)
    with pytest.raises(ValueError, match="node broke"):
        launched.wait(["main"], timeout=60)


def test_stop_handlers(lp_launch: Launch) -> None:
    program = lp.Program("handlers")
    program.add_node(lp.PyClassNode(Handlers), label="handlers")
    program.add_node(lp.PyClassNode(Handlers, exit=True), label="exiting")
    program.add_node(lp.PyNode(stop_after, 0.3), label="stopper")
    launched = lp_launch(program)
    assert launched.wait(timeout=60) == 0
    assert "handlers called: ['kept']" in launched.run.log("handlers")
    assert "handlers called: ['kept']" in launched.run.log("exiting")


def test_system_exit_from_a_stop_handler_is_a_clean_stop(lp_launch: Launch) -> None:
    program = lp.Program("terminator")
    program.add_node(lp.PyClassNode(Terminated), label="actor")
    program.add_node(lp.PyNode(stop_after, 0.3), label="stopper")
    launched = lp_launch(program)
    assert launched.wait(timeout=60) == 0
    assert {s.state for s in launched.run.status()} == {"finished"}


def test_an_exception_while_stopping_is_a_clean_stop(lp_launch: Launch) -> None:
    program = lp.Program("raising")
    program.add_node(lp.PyClassNode(RaiseOnStop), label="raiser")
    program.add_node(lp.PyNode(stop_after, 0.2), label="stopper")
    launched = lp_launch(program)
    assert launched.wait(timeout=60) == 0
    assert "ConnectionError: peer went away" in launched.run.log("raiser")


def test_unregistering_an_unknown_handler_is_an_error() -> None:
    with pytest.raises(ValueError, match="not a registered stop handler"):
        lp.unregister_stop_handler(noop)


def test_lp_stop_from_the_test_thread(lp_launch: Launch) -> None:
    program = lp.Program("outside")
    program.add_node(lp.PyNode(block), label="block")
    launched = lp_launch(program)
    lp.stop()
    assert launched.wait(timeout=60) == 0


def test_wait_returns_on_first_completed(lp_launch: Launch) -> None:
    program = lp.Program("first")
    program.add_node(lp.PyNode(block), label="waiter")
    program.add_node(lp.PyNode(noop), label="worker")
    launched = lp_launch(program)
    assert launched.wait(return_on_first_completed=True, timeout=60) is None
    assert launched.run.exit_code is None  # the waiter still runs
    states = {s.id: s.state for s in launched.run.status()}
    # On a busy machine the waiter may not have reported `running` yet when the worker ends.
    assert states["worker"] == "finished" and states["waiter"] in ("starting", "running")


def test_stop_handlers_run_before_nodes_see_the_stop(lp_launch: Launch, tmp_path: Path) -> None:
    program = lp.Program("checkpoint")
    with program.group("saver"):
        for i in range(2):
            program.add_node(lp.PyNode(checkpoint_on_stop, str(tmp_path / f"saved-{i}")))
    saved = [str(tmp_path / f"saved-{i}") for i in range(2)]
    program.add_node(lp.PyNode(stop_when_ready, saved), label="stopper")
    launched = lp_launch(program)
    assert launched.wait(timeout=60) == 0
    assert [(tmp_path / f"saved-{i}").read_text() for i in range(2)] == ["saved", "saved"]


def test_wait_takes_labels_first(lp_launch: Launch) -> None:
    program = lp.Program("misuse")
    program.add_node(lp.PyNode(noop), label="main")
    launched = lp_launch(program)
    with pytest.raises(TypeError, match=r"wait\(timeout=seconds\)"):
        launched.wait(60)  # type: ignore[arg-type]
    launched.wait("main", timeout=60)  # one label as a string
    assert [s.state for s in launched.run.status()] == ["finished"]


def test_a_constructor_failure_is_reraised_by_wait(lp_launch: Launch) -> None:
    program = lp.Program("broken")
    program.add_node(lp.CourierNode(BrokenInit), label="broken")
    program.add_node(lp.PyNode(block), label="block")
    with pytest.raises(KeyError, match="missing setting"):
        lp_launch(program).wait(timeout=60)


def test_labels_that_are_no_group_names_run(lp_launch: Launch) -> None:
    program = lp.Program("my program")
    with program.group("actors/cpu 0"):
        program.add_node(lp.PyNode(noop))
        program.add_node(lp.PyNode(noop))
    learner = program.add_node(lp.CourierNode(Runner), label="my learner")
    launched = lp_launch(program)
    assert {g.label for g in launched.program.groups} == {"actors/cpu 0", "my learner"}
    launched.wait(labels_to_wait_on=["actors/cpu 0"], timeout=60)
    assert learner is not None
    # the learner serves calls from before its run() is entered (as on Launchpad)
    runner = learner.dereference()
    wait_until(lambda: runner.runs() == 1, 60, what="the learner's run() to be entered")


def test_lp_stop_from_the_launching_thread_stops_a_one_node_program(lp_launch: Launch) -> None:
    """On test_mt the only node runs in this process: the launching thread is still not
    inside it, so lp.stop() here stops the launched program."""
    program = lp.Program("one")
    program.add_node(lp.CourierNode(block), label="only")
    launched = lp_launch(program)
    time.sleep(0.5)  # no event: the node's constructor (block) is entered meanwhile
    lp.stop()
    assert launched.wait(timeout=30) == 0
