"""What the Launchpad front end needs from the YAML path and the runtime, checked from
YAML: ``{import: ...}`` objects, a node's ``disable_run`` and ``dir(instance)`` served
(a deadline set on the destination, and exceptions raised while stopping counting as a
clean stop: the conformance suite, on every backend)."""

from __future__ import annotations

import os.path
from collections.abc import Callable
from typing import Any

from topo.ir import Opaque
from topo.testing import wait_gone, wait_until


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


def test_disable_run_of_one_node_and_dir_of_the_instance(
    topo_launch: Callable[..., Any], topology: Callable[..., Any]
) -> None:
    """In the IR, so alike on every backend (the program's ``disable_run``, ``dir`` and
    deadlines on each: the conformance suite, tests/backends/test_conformance.py)."""
    path = topology("""
        name: seams
        nodes:
          runner: {target: "bk_nodes:Runner", disable_run: true}
          other: {target: "bk_nodes:Runner"}
          wrapper: {target: "bk_nodes:Wrapper"}
    """)
    run = topo_launch(path, "threads", ready_timeout=60)
    assert run.program.node("runner").disable_run
    assert run.handle("runner").did_run() is False
    wait_until(run.handle("other").did_run, 30)  # run() starts just after the node is ready
    wrapper = run.handle("wrapper")
    assert wrapper.step() == "inner step"  # listed by the wrapper's __dir__ only
    assert wrapper.own() == "own"
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)
