"""The five seed programs, written with ``topo.launchpad`` (``examples/launchpad/``):
each runs on ``test_mt`` and ``test_mp`` and leaves no process behind, and each
exports to a YAML file of the same shape as its ``examples/topologies/`` file.

Shape: groups (name, kind, count, enabled), edges between groups (argument names
without indexes), executables as multisets of their nodes' groups, and per_process.
Targets and plain argument values are not compared: the Python programs run small
stand-in agents, the YAML files the real ones.
"""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import topo.launchpad as lp
from topo.export import export_program
from topo.ir import Program
from topo.testing import wait_gone, wait_until

ROOT = Path(__file__).resolve().parents[2]

# The one difference the rules impose: a group a parameter switches off (or
# gives no replicas) is in the YAML file, disabled or empty, while the Python program
# never adds it, so the export has no such group. These are those groups, by example.
ABSENT_IN_PYTHON = {
    "consumer_producers": set(),
    "acme_colocated": {"model_saver"},  # snapshots: false
    "acme_distributed": {"model_saver", "secondary_learner"},  # num_learners - 1 == 0
    "mava_dial": set(),
    "acme_offline": {"model_saver"},
}

# Small runs: (builder params, what the test does) on both launch types.
RUNS: dict[str, dict[str, Any]] = {
    "consumer_producers": {"num_producers": 2},  # the consumer stops the program
    "acme_colocated": {"num_actors": 2, "max_actor_steps": 10},  # the coordinator stops it
    "acme_distributed": {"num_actors": 3, "num_actors_per_node": 2, "max_actor_steps": 10},
    "mava_dial": {"num_executors": 2, "max_executor_steps": 10},
    "acme_offline": {"max_learner_steps": 10},
}


def _builder(name: str) -> Any:
    return importlib.import_module(f"examples.launchpad.{name}").make_program


def shape(program: Program) -> dict[str, Any]:
    """What the comparison looks at (see the module docstring)."""
    group_of = {n.id: n.group for n in program.nodes}
    return {
        "groups": {g.name: (g.kind, g.count, g.enabled) for g in program.groups if g.count},
        "edges": sorted(
            {(group_of[e.src], group_of[e.dst], e.arg.split("[")[0]) for e in program.edges}
        ),
        "executables": Counter(
            tuple(sorted(group_of[n] for n in e.nodes)) for e in program.executables
        ),
        "per_process": {  # one replica per process is no packing at all
            g.name: g.per_process for g in program.groups if g.per_process not in (None, 1)
        },
    }


@pytest.mark.parametrize("name", list(RUNS))
def test_exports_to_the_example_shape(name: str, compile_path: Any, tmp_path: Path) -> None:
    compiled = lp.compile_program(_builder(name)())
    exported = export_program(compiled.program, schema="../../schemas/topology.schema.json")
    path = tmp_path / f"{name}.yaml"
    path.write_text(exported.text, encoding="utf-8")
    ours = compile_path(path)
    example = compile_path(ROOT / "examples" / "topologies" / f"{name}.yaml")
    absent = {g.name for g in example.groups if not g.count}
    assert absent == ABSENT_IN_PYTHON[name]
    assert shape(ours) == shape(example), exported.text


def test_packed_actors_export_as_per_process(compile_path: Any, tmp_path: Path) -> None:
    """Acme's num_actors_per_node: thread colocations of the actor group."""
    program = _builder("acme_distributed")(num_actors=5, num_actors_per_node=2)
    exported = export_program(lp.compile_program(program).program, schema="s.json")
    path = tmp_path / "packed.yaml"
    path.write_text(exported.text, encoding="utf-8")
    example = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
    params = ["num_actors=5", "num_actors_per_node=2"]
    assert shape(compile_path(path)) == shape(compile_path(example, params))
    assert "per_process: 2" in exported.text


@pytest.mark.slow
@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
@pytest.mark.parametrize("name", list(RUNS))
def test_runs_and_stops_cleanly(name: str, launch_type: str, tmp_path: Path) -> None:
    launched = lp.launch(_builder(name)(**RUNS[name]), launch_type, log_dir=str(tmp_path))
    try:
        code = launched.wait(timeout=120)
    finally:
        launched.stop(timeout=60)
    assert code == 0, [s for s in launched.run.status() if s.state == "failed"]
    assert not wait_gone(launched.run.pids(), 15)


@pytest.mark.slow
@pytest.mark.parametrize("launch_type", ["test_mt", "test_mp"])
def test_drive_through_dereferenced_handles(launch_type: str, tmp_path: Path) -> None:
    """No steps limit: the test reads the counter through a handle, then stops."""
    program = _builder("acme_distributed")(num_actors=2, max_actor_steps=None)
    counter_node = program.groups["counter"][0]
    launched = lp.launch(program, launch_type, log_dir=str(tmp_path))
    try:
        counter = counter_node.create_handle().dereference()
        counts: dict[str, Any] = wait_until(
            lambda: (
                (c := counter.get_counts()).get("actor_steps", 0) >= 5
                and c.get("learner_steps", 0) >= 1
                and c
            ),
            120,  # jax, Reverb and the first batch on a busy machine
            what="5 actor steps and a learner step",
        )
        assert counts.get("evaluator_episodes", 0) >= 0
    finally:
        code = launched.stop(timeout=60)
    assert code == 0
    assert not wait_gone(launched.run.pids(), 15)
