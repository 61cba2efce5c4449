"""Launchpad idioms beyond the basics: the program_wait example (courier nodes built by
functions that block until stop), caches, batched handlers, how lp.launch is called."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
from lp_nodes import (
    Batched,
    BoundBatched,
    Echo,
    Variables,
    block,
    pw_register_stop_handler,
    pw_sleep,
    pw_stop_event,
    pw_wait_for_stop,
    stop_after,
)
from lp_support import Launch, stop_and_check

import topo.launchpad as lp


def test_program_wait_example(lp_launch: Launch) -> None:
    """Every way a node can wait for the stop, ended by one node's lp.stop()."""
    program = lp.Program("program_wait")
    for fn in (pw_sleep, pw_wait_for_stop, pw_stop_event, pw_register_stop_handler):
        program.add_node(lp.CourierNode(fn), label=fn.__name__)
    program.add_node(lp.CourierNode(stop_after, 0.3), label="_stop_program")
    launched = lp_launch(program)
    assert launched.wait(timeout=60) == 0
    assert launched.stop_event.is_set() and launched.stop_event is launched.stop_event


def test_batched_handler(lp_launch: Launch) -> None:
    program = lp.Program("batched")
    handle = program.add_node(lp.CourierNode(Batched), label="server")
    lp_launch(program)
    assert handle is not None
    client = handle.dereference()
    futures = [client.futures.double(i) for i in range(4)]
    assert [int(f.result(timeout=30)) for f in futures] == [0, 2, 4, 6]
    assert max(client.batch_sizes()) > 1


def test_a_padded_batched_handler_behind_a_property(lp_launch: Launch) -> None:
    """Acme's inference server: a short batch is padded to batch_size (copies of its first
    call, their results dropped), and namedtuples are batched field by field."""
    from lp_batch_nodes import Out, PaddedServer, ParamsRef

    program = lp.Program("padded")
    handle = program.add_node(lp.CourierNode(PaddedServer, 4), label="server")
    lp_launch(program)
    assert handle is not None
    client = handle.dereference()
    futures = [client.futures.handler(ParamsRef("policy"), i) for i in (1, 2)]
    results = [f.result(timeout=30) for f in futures]
    assert [type(r).__name__ for r in results] == ["Out", "Out"]
    assert [int(r.value) for r in results] == [10, 20]
    assert client.handler(ParamsRef("policy"), 3) == Out(30)
    sizes, refs = client.seen()
    assert set(sizes) == {4}  # padded, whatever arrived before the timeout
    assert refs[0] == ("ParamsRef", ["policy"] * 4)


def test_a_bound_method_batched_in_init(lp_launch: Launch) -> None:
    program = lp.Program("batched")
    handle = program.add_node(lp.CourierNode(BoundBatched), label="server")
    lp_launch(program)
    assert handle is not None
    client = handle.dereference()
    futures = [client.futures.triple(i) for i in range(4)]
    assert [int(f.result(timeout=30)) for f in futures] == [0, 3, 6, 9]
    assert max(client.batch_sizes()) > 1


def test_cacher_node_answers_from_its_cache(lp_launch: Launch) -> None:
    """Mava's and Acme's variable caches: get_variables answered from the cache."""
    program = lp.Program("cached")
    source = program.add_node(lp.CourierNode(Variables), label="source")
    assert source is not None
    cache = program.add_node(lp.CacherNode(source, refresh_interval_ms=60_000), label="cache")
    lp_launch(program)
    assert cache is not None
    client = cache.dereference()
    assert [client.get_variables(["w"]) for _ in range(5)] == [{"w": 1}] * 5
    assert source.dereference().count() == 1


@dataclasses.dataclass
class Config:
    peer: Any


def test_a_handle_inside_an_object_is_refused_with_advice(lp_launch: Launch) -> None:
    program = lp.Program("hidden")
    peer = program.add_node(lp.CourierNode(Echo), label="peer")
    program.add_node(lp.CourierNode(Echo, Config(peer)), label="user")
    with pytest.raises(lp.ProgramError, match=r"node user .*pass it to a node as an argument"):
        lp_launch(program)


def test_launch_call_forms(tmp_path: Any) -> None:
    """``programs=`` as a keyword, a list of programs, a LaunchType member."""
    program = lp.Program("forms")
    program.add_node(lp.PyNode(block), label="block")
    program.add_node(lp.PyNode(stop_after, 0.1), label="stop")
    launched = lp.launch(
        programs=[program],
        launch_type=lp.LaunchType.TEST_MULTI_THREADING,
        xm_resources=None,
        terminal="current_terminal",
        log_dir=str(tmp_path),
    )
    assert launched.run.launcher.backend.name == "threads"
    assert launched.wait(timeout=60) == 0
    stop_and_check(launched)


def test_dereference_before_launch_is_an_error() -> None:
    handle = lp.CourierNode(Echo).create_handle()
    with pytest.raises(RuntimeError, match="not part of a launched program"):
        handle.dereference()


def test_wait_with_a_timeout_returns_none_while_running(lp_launch: Launch) -> None:
    program = lp.Program("timeout")
    program.add_node(lp.PyNode(block), label="block")
    launched = lp_launch(program)
    started = time.monotonic()
    assert launched.wait(timeout=0.3) is None
    assert 0.2 < time.monotonic() - started < 10
    assert launched.stop(timeout=60) == 0
