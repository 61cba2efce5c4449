"""Placing a changed program around the executables that run (``topo apply`` on ssh):
the running ones stay where they are and count there, only the new ones are placed, by
the rules of the start, on hosts that are up."""

from __future__ import annotations

from typing import Any

import pytest

from tests.backends.ssh.test_placement import THREE, inventory, loads
from topo.backends.ssh.placement import place
from topo.backends.ssh.update import modules_by_host, new_modules, placement_after
from topo.diagnostics import TopoError

GROUP = """
name: t
nodes:
  worker: {{target: m:W, count: {n}, resources: {{spread: {spread}}}}}
  caller: {{target: m:C}}
"""


def _program(compile_text: Any, n: int, spread: bool = False) -> Any:
    return compile_text(GROUP.format(n=n, spread=str(spread).lower()))


def test_running_executables_stay_and_new_ones_fill_the_least_loaded_hosts(
    compile_text: Any,
) -> None:
    running = place(_program(compile_text, 2), THREE)
    before = running.assignment()
    grown = placement_after(_program(compile_text, 5), running, THREE, {"h1", "h2", "h3"})
    after = grown.assignment()
    assert {e: after[e] for e in before} == before  # nothing that runs moves
    assert loads(grown) == {"h1": 2, "h2": 2, "h3": 2}  # balanced again


def test_a_spread_group_grows_onto_hosts_of_its_own_and_no_further(compile_text: Any) -> None:
    running = place(_program(compile_text, 1, spread=True), THREE)
    up = {"h1", "h2", "h3"}
    grown = placement_after(_program(compile_text, 3, spread=True), running, THREE, up)
    assert len({grown.host_of(f"worker/{i}") for i in range(3)}) == 3
    with pytest.raises(TopoError) as info:
        placement_after(_program(compile_text, 4, spread=True), grown, THREE, up)
    [d] = info.value.diagnostics
    assert d.message.startswith("group 'worker' sets resources.spread: each of its processes")
    assert d.pos is not None and d.pos.line == 3


def test_capacity_counts_what_runs_but_not_what_leaves(compile_text: Any) -> None:
    small = inventory(("h1", (), 1), ("h2", (), 1), ("h3", (), 1))
    up = {"h1", "h2", "h3"}
    running = place(_program(compile_text, 2), small)  # three executables, one a host
    with pytest.raises(TopoError) as info:
        placement_after(_program(compile_text, 3), running, small, up)
    [d] = info.value.diagnostics
    assert d.message.startswith("group 'worker' needs room for 1 executable(s) on one host")
    assert "h1 (no labels, 1 of capacity 1 taken)" in d.message
    swapped = compile_text(
        "name: t\nnodes:\n  worker: {target: m:W, count: 1}\n  caller: {target: m:C}\n"
        "  other: {target: m:O}\n"
    )
    after = placement_after(swapped, running, small, up)  # worker/1 leaves: room for other
    assert after.host_of("other") == running.host_of("worker/1")
    assert after.where("worker/1") == running.host_of("worker/1")  # still known, leaving
    assert "worker/1" in after.leaving and "worker/1" not in after.executables_on("h2")


def test_only_hosts_that_are_up_take_new_executables(compile_text: Any) -> None:
    running = place(_program(compile_text, 3), THREE)
    grown = placement_after(_program(compile_text, 6), running, THREE, {"h1"})
    assert {grown.host_of(f"worker/{i}") for i in range(3, 6)} == {"h1"}
    labelled = inventory(("h1", (), None), ("h2", ("gpu",), None))
    extra = compile_text(
        "name: t\nnodes:\n  worker: {target: m:W}\n  g: {target: m:G, resources: "
        "{host_labels: [gpu]}}\n"
    )
    base = place(compile_text("name: t\nnodes:\n  worker: {target: m:W}\n"), labelled)
    with pytest.raises(TopoError, match="needs a host labelled gpu, and every such host is lost"):
        placement_after(extra, base, labelled, {"h1"})


def test_a_running_host_set_takes_its_new_members_on_its_host(compile_text: Any) -> None:
    text = """
        name: t
        nodes:
          learner: {target: m:L}
          replay: {target: m:R, count: COUNT}
          actor: {target: m:A, count: 3}
        colocation:
          - {name: core, nodes: ["@learner", "@replay"], mode: host}
        """
    small = inventory(("h1", (), 3), ("h2", (), 3), ("h3", (), 3))
    running = place(compile_text(text.replace("COUNT", "1")), small)
    core = running.host_of("learner")
    grown = placement_after(compile_text(text.replace("COUNT", "2")), running, small, THREE.names)
    assert grown.host_of("replay/1") == core
    with pytest.raises(TopoError) as info:
        placement_after(compile_text(text.replace("COUNT", "4")), running, small, THREE.names)
    [d] = info.value.diagnostics
    assert d.message.startswith(
        f"host set 'core' (5 executables of groups 'learner', 'replay') "
        f"runs on host {core} and would take 3 more executable(s)"
    )


def test_the_new_modules_and_the_hosts_that_import_them(compile_text: Any) -> None:
    running = place(_program(compile_text, 1), THREE)
    old = _program(compile_text, 1)
    new = compile_text(GROUP.format(n=1, spread="false") + "  extra: {target: other.mod:X}\n")
    grown = placement_after(new, running, THREE, THREE.names)
    assert new_modules(new, old) == ["other.mod"]
    assert modules_by_host(new, ["other.mod"], grown) == {grown.host_of("extra"): ["other.mod"]}


def test_an_executable_whose_host_requirements_change_is_placed_again(
    compile_text: Any,
) -> None:
    labelled = inventory(("h1", (), None), ("h2", ("gpu",), None))
    plain = compile_text("name: t\nnodes:\n  a: {target: m:A}\n  b: {target: m:B}\n")
    running = place(plain, labelled)
    assert running.host_of("a") == "h1"
    wants_gpu = compile_text(
        "name: t\nnodes:\n  a: {target: m:A, resources: {host_labels: [gpu]}}\n  b: {target: m:B}\n"
    )
    after = placement_after(wants_gpu, running, labelled, {"h1", "h2"}, plain)
    assert after.host_of("a") == "h2"  # it restarts anyway: on a host that has the label
    assert after.host_of("b") == running.host_of("b")
