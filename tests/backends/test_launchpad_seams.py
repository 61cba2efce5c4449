"""What the Launchpad front end needs from the YAML path and the runtime, checked from
YAML: ``{import: ...}`` objects, ``disable_run``, a deadline set on the destination,
``dir(instance)`` served, and exceptions raised while stopping counting as a clean stop."""

from __future__ import annotations

import os.path
import time
from collections.abc import Callable
from typing import Any

import pytest

from topo.ir import Opaque
from topo.testing import wait_gone

BACKENDS = ["threads", "procs"]


def test_import_values_compile_to_objects_and_bad_ones_point_at_the_yaml(
    compile_text: Callable[..., Any], errors_of: Callable[..., Any]
) -> None:
    program = compile_text("""
        name: t
        nodes:
          a: {target: "m:A", args: {fn: {import: "os.path:join"}, plain: {other: 1}}}
    """)
    fn = program.node("a").args["fn"]
    assert isinstance(fn, Opaque) and fn.load() is os.path.join
    assert dict(program.node("a").args["plain"]) == {"other": 1}
    failure = errors_of("""
        name: t
        nodes:
          a: {target: "m:A", args: {fn: {import: "not a path"}}}
    """)
    assert "import takes 'package.module:attribute'" in failure.headline
    _, line, col = failure.where()
    text = '  a: {target: "m:A", args: {fn: {import: "not a path"}}}'
    assert (line, col) == (3, text.index('"not a path"') + 1)  # the value itself


@pytest.mark.parametrize("backend", BACKENDS)
def test_disable_run_and_dir_of_the_instance(
    topo_launch: Callable[..., Any], topology: Callable[..., Any], backend: str
) -> None:
    path = topology("""
        name: seams
        nodes:
          runner: {target: "bk_nodes:Runner", disable_run: true}
          other: {target: "bk_nodes:Runner"}
          wrapper: {target: "bk_nodes:Wrapper"}
    """)
    run = topo_launch(path, backend, ready_timeout=60)
    assert run.program.node("runner").disable_run
    assert run.handle("runner").did_run() is False
    other = run.handle("other")
    deadline = time.monotonic() + 30  # run() starts just after the node is ready
    while not other.did_run() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert other.did_run() is True
    wrapper = run.handle("wrapper")
    assert wrapper.step() == "inner step"  # listed by the wrapper's __dir__ only
    assert wrapper.own() == "own"
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_deadline_set_on_the_destination_beats_the_callers(
    topo_launch: Callable[..., Any], topology: Callable[..., Any], backend: str
) -> None:
    path = topology("""
        name: deadlines
        nodes:
          sleeper: {target: "bk_nodes:Sleeper", rpc: {call_timeout_s: 0.3}}
          caller: {target: "bk_nodes:Caller", args: {peer: "@sleeper"}, rpc: {deadline_s: 30}}
    """)
    run = topo_launch(path, backend, ready_timeout=60)
    caller = run.handle("caller")
    assert caller.ask(0.0) == "rested"
    answer = caller.ask(2.0)
    assert answer.startswith("DeadlineExceeded") and "Deadline Exceeded" in answer
    assert run.stop(timeout=60) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_exception_raised_while_stopping_is_a_clean_stop(
    topo_launch: Callable[..., Any], topology: Callable[..., Any], backend: str
) -> None:
    path = topology("""
        name: stopping
        nodes:
          raiser: {target: "bk_nodes:RaisesOnStop"}
          echo: {target: "bk_nodes:Echo"}
    """)
    run = topo_launch(path, backend, ready_timeout=60)
    assert run.stop(timeout=60) == 0
    assert run.failure is None
    assert {s.state for s in run.status() if s.id == "raiser"} == {"finished"}
    assert "peer went away while stopping" in run.log("raiser")
    assert not wait_gone(run.pids(), 15)
