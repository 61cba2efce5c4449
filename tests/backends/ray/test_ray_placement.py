"""What the ray backend asks of Ray, and what it refuses before contacting anything: pure
functions over the Program IR (no Ray)."""

from __future__ import annotations

from typing import Any

from topo.backends.ray.placement import (
    demand,
    format_ray_placement,
    infeasible,
    own_actor,
    units,
)

PLACED = """
name: placed
nodes:
  left: {target: "m:R"}
  right: {target: "m:R", resources: {host_labels: [gpu], gpus: [0]}}
  spread: {target: "m:R", count: 3, resources: {spread: true, cpus: [0, 1]}}
  actor: {target: "m:A", count: 4, colocate: {per_process: 2}}
colocation:
  - {name: pair, nodes: ["@left", "@right"], mode: host}
"""

NODE = {"CPU": 4.0, "GPU": 1.0, "gpu": 1.0, "memory": 1e9}
PLAIN = {"CPU": 4.0, "memory": 1e9}


def test_demands_count_cpus_and_gpus_and_ask_for_labels(compile_text: Any) -> None:
    program = compile_text(PLACED)
    assert demand(program, "left") == {"CPU": 0.001}  # a thousand fit on one core
    assert demand(program, "right") == {"CPU": 0.001, "GPU": 1.0, "gpu": 0.001}
    assert demand(program, "spread/1") == {"CPU": 2.0}  # cpus: [0, 1] is two cores


def test_units_gather_host_sets_and_spread_groups(compile_text: Any) -> None:
    found = {u.name: (u.strategy, u.exes) for u in units(compile_text(PLACED))}
    assert found == {
        "pair": ("STRICT_PACK", ("left", "right")),
        "spread": ("STRICT_SPREAD", ("spread/0", "spread/1", "spread/2")),
        "actor/0-1": (None, ("actor/0-1",)),
        "actor/2-3": (None, ("actor/2-3",)),
    }


def test_feasible_on_enough_nodes(compile_text: Any) -> None:
    assert infeasible(compile_text(PLACED), [NODE, PLAIN, PLAIN]) == []


def test_a_spread_group_needs_a_node_per_process(compile_text: Any) -> None:
    [d] = infeasible(compile_text(PLACED), [NODE, PLAIN])
    assert d.message == (
        "group 'spread' sets resources.spread: its 3 processes need 3 Ray nodes that offer "
        "2 CPU, and the cluster has 2"
    )
    assert d.pos is not None and d.pos.line == 5
    assert d.hint is not None and "2 node(s)" in d.hint


def test_a_host_set_needs_one_node_with_everything(compile_text: Any) -> None:
    errors = infeasible(compile_text(PLACED), [PLAIN, PLAIN, PLAIN])
    [d] = [e for e in errors if "pair" in e.message]
    assert d.message.startswith("host-colocation set 'pair' (groups 'left', 'right')")
    assert "1 GPU" in d.message and "label 'gpu'" in d.message
    assert len(errors) == 1


def test_only_executables_that_ask_for_gpus_get_an_actor_of_their_own(
    compile_text: Any,
) -> None:
    program = compile_text(PLACED)
    assert [e.id for e in program.executables if own_actor(program, e.id)] == ["right"]


def test_what_fits_node_by_node_but_not_all_at_once_is_refused(compile_text: Any) -> None:
    program = compile_text(PLACED)  # 6 CPU for the spread group alone, and 2 more
    [d] = infeasible(program, [{**NODE, "CPU": 2.0}, {"CPU": 2.0}, {"CPU": 2.0}])
    assert d.message == (
        "the program's 7 processes ask Ray for 6.004 CPU in all, and the cluster's live "
        "nodes have 6"
    )
    assert d.hint is not None and "0.001 CPU" in d.hint


def test_plan_prints_what_ray_is_asked(compile_text: Any) -> None:
    text = format_ray_placement(compile_text(PLACED))
    assert text.splitlines() == [
        "ray placement of 7 executable(s), forked by a topo agent on each Ray node they "
        "are placed on",
        "  STRICT_PACK placement group 'pair' (one node)",
        "    left  [0.001 CPU]",
        "    right  [0.001 CPU, 1 GPU, label 'gpu']  (a Ray actor of its own: Ray assigns "
        "its GPUs)",
        "  STRICT_SPREAD placement group 'spread' (a node per process)",
        "    spread/0  [2 CPU]",
        "    spread/1  [2 CPU]",
        "    spread/2  [2 CPU]",
        "  SPREAD placement group (Ray balances these over the nodes)",
        "    actor/0-1: actor/0, actor/1  [0.001 CPU]",
        "    actor/2-3: actor/2, actor/3  [0.001 CPU]",
    ]


def test_topo_plan_backend_ray(write_topo: Any, run_topo: Any) -> None:
    result = run_topo("plan", write_topo(PLACED), "--backend", "ray")
    assert result.exit_code == 0, result.output
    assert "exe spread/0" in result.output  # the plan itself, then what Ray is asked
    assert "STRICT_SPREAD placement group 'spread' (a node per process)" in result.output
