"""Opaque values end to end: a Program built in Python with a closure and a module-level
function as node arguments, shipped as JSON to the procs fork server and run there."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable

import ir_nodes

from topo.ir import Opaque, Program, dumps, freeze, loads
from topo.ir.printer import format_program

TOPOLOGY = """
    name: opaque
    nodes:
      applier: {target: "ir_nodes:Applier", args: {tag: from-yaml}}
"""


def with_python_args(program: Program, offset: int) -> Program:
    """The compiled program with the applier's args replaced by Python objects."""
    node = program.node("applier")
    args = freeze(
        {
            **node.args,
            "fn": ir_nodes.triple,
            "post": lambda y: y + offset,  # a closure: pickled by value
            "spec": ir_nodes.EnvSpec("CartPole-v1", 500),
        }
    )
    assert isinstance(args, type(node.args))
    return dataclasses.replace(program, nodes=(dataclasses.replace(node, args=args),))


def test_closure_and_function_args_run_on_procs(
    compile_text: Callable[..., Program], topo_launch: Callable
) -> None:
    program = with_python_args(compile_text(TOPOLOGY), offset=10)
    args = program.node("applier").args
    assert args["fn"] == Opaque("<function triple from ir_nodes>", import_path="ir_nodes:triple")
    assert args["post"].pickled and args["spec"].pickled

    run = topo_launch(program, "procs", ready_timeout=60)
    applier = run.handle("applier")
    assert applier.apply(4) == 3 * 4 + 10
    seen = applier.describe()
    assert seen.pop("pid") != os.getpid()  # built and run in a forked worker
    assert seen == {"spec": ("CartPole-v1", 500), "tag": "from-yaml", "fn": "ir_nodes:triple"}
    written = json.loads((run.run_dir / "program.json").read_text())
    node_args = written["nodes"][0]["args"]
    assert node_args["fn"] == {
        "$opaque": {"import": "ir_nodes:triple", "description": "<function triple from ir_nodes>"}
    }
    post = node_args["post"]["$opaque"]
    assert set(post) == {"payload", "description"}  # the bytes are in the payloads table
    assert post["payload"] in written["payloads"]
    assert run.stop(timeout=60) == 0


def test_opaque_program_round_trips_and_prints(compile_text: Callable[..., Program]) -> None:
    program = with_python_args(compile_text(TOPOLOGY), offset=1)
    again = loads(dumps(program))
    assert again == program
    assert dumps(again) == dumps(program)
    post = again.node("applier").args["post"].load()
    assert post(41) == 42
    assert again.node("applier").args["fn"].load() is ir_nodes.triple
    text = format_program(program)
    assert "fn=<function triple from ir_nodes>" in text
    assert "post=<pickled lambda, " in text
    assert "spec=<pickled EnvSpec, " in text
    assert "tag='from-yaml'" in text
