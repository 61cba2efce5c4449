"""Courier nodes and their handles, on threads (test_mt) and processes (test_mp)."""

from __future__ import annotations

import datetime
import os
import threading
from typing import Any

import pytest
from lp_nodes import Echo, Fanout, Pair, Peer, Runner, Slow, Value, Wrapper
from lp_support import Launch

import topo.launchpad as lp
from topo.runtime.errors import DeadlineExceeded
from topo.testing import wait_until


def test_handles_dereference_from_the_test_thread(lp_launch: Launch) -> None:
    program = lp.Program("deref")
    echo = program.add_node(lp.CourierNode(Echo), label="echo")
    lp_launch(program)
    assert echo is not None
    client = echo.dereference()
    assert client.ping() == "pong"
    assert client.futures.ping().result(timeout=30) == "pong"
    with pytest.raises(AttributeError):
        client._private()  # private methods are not served


def test_calls_between_nodes_with_positional_args(lp_launch: Launch, launch_type: str) -> None:
    program = lp.Program("pair")
    left = program.add_node(lp.CourierNode(Value, 2), label="left")
    right = program.add_node(lp.CourierNode(Value, 5), label="right")
    pair = program.add_node(lp.CourierNode(Pair, left, right, scale=10), label="pair")
    lp_launch(program)
    assert pair is not None
    assert pair.dereference().total() == 70


def test_lists_and_dicts_of_handles(lp_launch: Launch) -> None:
    program = lp.Program("fanout")
    with program.group("value"):
        values = [program.add_node(lp.CourierNode(Value, i)) for i in range(3)]
    fan = lp.CourierNode(Fanout, peers=values, by_name={"first": values[0], "last": values[2]})
    handle = program.add_node(fan, label="fanout")
    lp_launch(program)
    assert handle is not None
    assert handle.dereference().values() == {"list": [0, 1, 2], "dict": {"first": 0, "last": 2}}


def test_closures_and_lambdas_as_constructors_and_args(lp_launch: Launch, launch_type: str) -> None:
    secret = {"word": "swordfish"}

    def make_echo(word: str) -> Echo:  # a closure: cloudpickled, built where the node runs
        return Echo(word, secret["word"])

    program = lp.Program("closures")
    closure = program.add_node(lp.CourierNode(make_echo, "hello"), label="closure")
    lam = program.add_node(lp.CourierNode(lambda f: Echo(f(3)), lambda x: x * 7), label="lambda")
    lp_launch(program)
    assert closure is not None and lam is not None
    client = closure.dereference()
    assert client.given() == {"args": ["hello", "swordfish"], "kwargs": []}
    assert lam.dereference().given()["args"] == [21]
    if launch_type == "test_mp":  # built in another process
        assert client.pid() != os.getpid()
    else:
        assert client.pid() == os.getpid()


def test_dir_of_the_instance_is_served(lp_launch: Launch) -> None:
    program = lp.Program("wrapped")
    handle = program.add_node(lp.CourierNode(Wrapper), label="learner")
    lp_launch(program)
    assert handle is not None
    learner = handle.dereference()
    assert learner.step() == "stepped"  # found through __dir__, not the class
    assert learner.get_variables(["w"]) == ["var:w"]
    assert learner.wrapper_only() == "wrapper"


def test_call_timeout_raises_deadline_exceeded(lp_launch: Launch) -> None:
    program = lp.Program("deadline")
    node = lp.CourierNode(
        Slow, courier_client_kwargs={"call_timeout": datetime.timedelta(milliseconds=200)}
    )
    handle = program.add_node(node, label="slow")
    lp_launch(program)
    assert handle is not None
    client = handle.dereference()
    # a call of none may outlast the 0.2 s on a busy machine: asked again
    up = wait_until(lambda: [client.slow(0.0)], 30, what="slow up", errors=(DeadlineExceeded,))
    assert up == ["done"]
    with pytest.raises(Exception, match="Deadline Exceeded"):  # not "done" a second later
        client.slow(1.0)


def test_calls_without_call_timeout_wait_as_launchpads_do(lp_launch: Launch) -> None:
    """Launchpad's calls have no deadline (a learner's first step may wait minutes for
    replay to fill and for compilation): topo's wait an hour; call_timeout still wins."""
    program = lp.Program("patient")
    slow = program.add_node(lp.CourierNode(Slow), label="slow")
    program.add_node(
        lp.CourierNode(Slow, courier_client_kwargs={"call_timeout": 0.2}), label="quick"
    )
    launched = lp_launch(program)
    rpc = {g.name: g.rpc for g in launched.program.groups}
    assert (rpc["slow"].deadline_s, rpc["slow"].call_timeout_s) == (3600.0, None)
    assert rpc["quick"].call_timeout_s == 0.2
    assert rpc["quick"].deadline_s == 3600.0  # of calls the node makes
    assert slow is not None and slow.dereference().slow(0.0) == "done"


def test_call_timeout_applies_to_calls_from_other_nodes(lp_launch: Launch) -> None:
    def call_slow(slow: Any) -> None:
        # slow up (the short deadline also bounds this wait: each call fails at once)
        # (a call of none may outlast the 0.2 s on a busy machine: asked again)
        up_errors = (ConnectionError, DeadlineExceeded)
        wait_until(lambda: [slow.slow(0.0)], 30, what="slow up", errors=up_errors)
        try:
            slow.slow(1.0)
        except Exception as exc:
            print(f"caught: {exc}", flush=True)
            raise ValueError(f"caught {exc}") from None

    program = lp.Program("deadline2")
    slow = program.add_node(
        lp.CourierNode(Slow, courier_client_kwargs={"call_timeout": 0.2}), label="slow"
    )
    program.add_node(lp.PyNode(call_slow, slow), label="caller")
    launched = lp_launch(program)
    with pytest.raises(ValueError, match="Deadline Exceeded"):
        launched.wait(timeout=30)


@pytest.mark.parametrize("pool", [1, 3])
def test_thread_pool_size_bounds_concurrent_handlers(lp_launch: Launch, pool: int) -> None:
    program = lp.Program("pool")
    handle = program.add_node(
        lp.CourierNode(Slow, courier_kwargs={"thread_pool_size": pool}), label="slow"
    )
    lp_launch(program)
    assert handle is not None
    client = handle.dereference()
    futures = [client.futures.busy(0.15) for _ in range(6)]
    for f in futures:
        f.result(timeout=30)
    assert client.most() == pool


def test_disable_run_serves_without_calling_run(lp_launch: Launch) -> None:
    program = lp.Program("norun")
    quiet = lp.CourierNode(Runner)
    quiet.disable_run()
    loud = lp.CourierNode(Runner)
    quiet_handle = program.add_node(quiet, label="quiet")
    loud_handle = program.add_node(loud, label="loud")
    lp_launch(program)
    assert quiet_handle is not None and loud_handle is not None
    assert quiet_handle.dereference().runs() == 0
    wait_until(lambda: loud_handle.dereference().runs() >= 1, 30, what="loud's run()")
    assert loud_handle.dereference().runs() == 1


def test_signature_mismatch_is_refused_at_launch(lp_launch: Launch) -> None:
    program = lp.Program("mismatch")
    program.add_node(lp.CourierNode(Value, 1, 2), label="value")
    with pytest.raises(lp.ProgramError, match=r"node value \(CourierNode\(Value\)\).*argument"):
        lp_launch(program)


def test_an_unpicklable_argument_names_the_node(lp_launch: Launch) -> None:
    program = lp.Program("unpicklable")
    program.add_node(lp.CourierNode(Echo, threading.Lock()), label="locked")
    with pytest.raises(lp.ProgramError, match=r"node locked \(CourierNode\(Echo\)\)"):
        lp_launch(program)


def test_cyclic_references_with_configure_and_call(lp_launch: Launch) -> None:
    program = lp.Program("cycle")
    foo, bar = lp.CourierNode(Peer, "foo"), lp.CourierNode(Peer, "bar")
    foo_handle = program.add_node(foo, label="foo")
    bar_handle = program.add_node(bar, label="bar")
    foo.configure("foo", peer=bar_handle)
    bar.configure(name="bar", peer=foo_handle)
    lp_launch(program)
    assert foo_handle is not None and bar_handle is not None
    client = foo_handle.dereference()
    assert client.peer_name() == "bar"
    assert bar_handle.dereference().peer_name() == "foo"
    assert client() == "hi from foo"  # __call__ is served, as by courier
    assert client.futures("hello").result(timeout=30) == "hello from foo"
