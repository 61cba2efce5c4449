"""Placing a program's executables on the hosts of an inventory, and moving them when a
host is lost."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from tests.backends.ssh.inventories import made_up
from topo.backends.ssh.inventory import Inventory
from topo.backends.ssh.placement import Placement, format_placement, place
from topo.diagnostics import TopoError
from topo.ir import Program


def inventory(*hosts: tuple[str, tuple[str, ...], int | None]) -> Inventory:
    """Hosts given as (name, labels, capacity), addressed 10.0.0.1, 10.0.0.2..."""
    return made_up({name: {"labels": labels, "capacity": cap} for name, labels, cap in hosts})


THREE = inventory(("h1", (), None), ("h2", (), None), ("h3", (), None))


def loads(placement: Placement) -> dict[str, int]:
    return {h: len(exes) for h, exes in placement.as_dict().items()}


def test_balanced_spread(compile_text: Any) -> None:
    program = compile_text("name: t\nnodes:\n  actor: {target: m:A, count: 9}\n")
    placement = place(program, THREE)
    assert loads(placement) == {"h1": 3, "h2": 3, "h3": 3}
    assert placement.executables_on("h1") == ["actor/0", "actor/3", "actor/6"]
    assert placement.host_of("actor/1") == "h2"


def test_labels_are_honoured_and_placed_first(compile_text: Any) -> None:
    program = compile_text(
        """
        name: t
        nodes:
          actor: {target: m:A, count: 4}
          learner: {target: m:L, resources: {host_labels: [gpu]}}
          big: {target: m:B, count: 2, resources: {host_labels: [gpu, mem]}}
        """
    )
    inv = inventory(("h1", (), None), ("h2", ("gpu",), None), ("h3", ("mem", "gpu"), None))
    placement = place(program, inv)
    assert {placement.host_of(f"big/{i}") for i in range(2)} == {"h3"}
    assert placement.host_of("learner") == "h2"  # the host with fewer executables so far
    assert loads(placement) == {"h1": 3, "h2": 2, "h3": 2}


def test_host_colocation_set_shares_one_host(compile_text: Any) -> None:
    program = compile_text(
        """
        name: t
        nodes:
          replay: {target: m:R}
          learner: {target: m:L}
          actor: {target: m:A, count: 4}
        colocation:
          - {name: core, nodes: ["@learner", "@replay"], mode: host}
        """
    )
    placement = place(program, THREE)
    assert placement.host_of("learner") == placement.host_of("replay") == "h1"  # bigger first
    assert loads(placement) == {"h1": 2, "h2": 2, "h3": 2}


def test_thread_colocation_is_one_executable(compile_text: Any) -> None:
    program = compile_text(
        "name: t\nnodes:\n  actor: {target: m:A, count: 6, colocate: {per_process: 3}}\n"
    )
    inv = inventory(("h1", (), 1), ("h2", (), 1))
    placement = place(program, inv)  # 6 nodes, 2 processes: fits capacity 1 + 1
    assert loads(placement) == {"h1": 1, "h2": 1}


def test_capacity_is_respected(compile_text: Any) -> None:
    program = compile_text("name: t\nnodes:\n  actor: {target: m:A, count: 6}\n")
    placement = place(program, inventory(("h1", (), 1), ("h2", (), None), ("h3", (), 2)))
    assert loads(placement) == {"h1": 1, "h2": 3, "h3": 2}


def test_a_label_no_host_has(compile_text: Any) -> None:
    program = compile_text(
        """
        name: t
        nodes:
          actor: {target: m:A, count: 2}
          learner:
            target: m:L
            resources: {host_labels: [gpu]}
        """
    )
    with pytest.raises(TopoError) as info:
        place(program, inventory(("h1", ("cpu",), None), ("h2", (), 3)))
    [d] = info.value.diagnostics
    assert d.message == (
        "group 'learner' needs a host labelled gpu, and no host has it "
        "(hosts: h1 (cpu); h2 (no labels, 0 of capacity 3 taken))"
    )
    assert d.pos is not None and (d.pos.line, d.pos.col) == (4, 3)  # the group's key
    assert d.hint is not None and "labels" in d.hint


def test_no_room_left(compile_text: Any) -> None:
    program = compile_text(
        """
        name: t
        nodes:
          learner: {target: m:L, resources: {host_labels: [gpu]}}
          replay: {target: m:R}
        colocation:
          - {name: core, nodes: ["@learner", "@replay"], mode: host}
        """
    )
    with pytest.raises(TopoError) as info:
        place(program, inventory(("h1", ("gpu",), 1), ("h2", (), None)))
    [d] = info.value.diagnostics
    assert d.message.startswith(
        "host set 'core' (2 executables of groups 'learner', 'replay') needs room for 2 "
        "executable(s) on one host labelled gpu, and none is left"
    )
    assert "h1 (gpu, 0 of capacity 1 taken)" in d.message
    assert d.pos is not None and d.pos.line == 3


def test_every_unit_that_does_not_fit_is_reported(compile_text: Any) -> None:
    program = compile_text("name: t\nnodes:\n  actor: {target: m:A, count: 4}\n")
    with pytest.raises(TopoError) as info:
        place(program, inventory(("h1", (), 1), ("h2", (), 1)))
    assert len(info.value.diagnostics) == 2


def test_relocate_when_a_host_is_lost(compile_text: Any) -> None:
    program: Program = compile_text(
        """
        name: t
        nodes:
          replay: {target: m:R}
          learner: {target: m:L}
          actor: {target: m:A, count: 4, resources: {host_labels: [cpu]}}
        colocation:
          - {name: core, nodes: ["@learner", "@replay"], mode: host}
        """
    )
    inv = inventory(("h1", ("cpu",), None), ("h2", ("cpu",), None), ("h3", (), 3))
    placement = place(program, inv)
    assert placement.host_of("learner") == "h3"  # the only host left after the labelled actors
    assert placement.relocate("actor/0", {"h1", "h2", "h3"}) == "h1"  # alive: stays
    # h3 lost: the set needs 2 slots on a host; h1 and h2 carry cpu actors, h1 first
    alive = {"h1", "h2"}
    first = placement.relocate("learner", alive)
    assert first == "h1"
    assert placement.relocate("replay", alive) == first  # follows its set member
    # h1 lost too: actor/0 and actor/2 need a cpu host; h2 is the only one
    assert placement.relocate("actor/0", {"h2", "h3"}) == "h2"
    # h3 back, h1 lost: the set (both on h1) moves to the least loaded host with room
    # for both: h3 (capacity 3)
    assert placement.relocate("learner", {"h2", "h3"}) == "h3"
    assert placement.relocate("replay", {"h2", "h3"}) == "h3"
    assert placement.executables_on("h3") == ["replay", "learner"]


def test_relocate_needs_labels_and_room(compile_text: Any) -> None:
    program = compile_text(
        "name: t\nnodes:\n  a: {target: m:A, count: 2, resources: {host_labels: [gpu]}}\n"
        "  b: {target: m:B}\n"
    )
    placement = place(program, inventory(("h1", ("gpu",), None), ("h2", (), 1)))
    assert placement.as_dict() == {"h1": ["a/0", "a/1"], "h2": ["b"]}
    assert placement.relocate("a/0", {"h2"}) is None  # h2 has no gpu label
    assert placement.host_of("a/0") == "h1"  # unchanged
    assert placement.relocate("b", {"h1"}) == "h1"


def test_relocate_is_thread_safe(compile_text: Any) -> None:
    program = compile_text("name: t\nnodes:\n  a: {target: m:A, count: 40}\n")
    inv = inventory(("h1", (), None), ("h2", (), 20), ("h3", (), 20))
    placement = place(program, inv)
    moved = placement.executables_on("h1")
    barrier = threading.Barrier(len(moved))
    results: list[str | None] = []

    def move(exe: str) -> None:
        barrier.wait()
        results.append(placement.relocate(exe, {"h2", "h3"}))

    threads = [threading.Thread(target=move, args=(e,)) for e in moved]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    count = Counter(placement.host_of(f"a/{i}") for i in range(40))
    assert count == {"h2": 20, "h3": 20}  # never past a capacity, whatever the interleaving
    assert None not in results


def test_format_placement(compile_text: Any) -> None:
    program = compile_text(
        """
        name: t
        nodes:
          learner: {target: m:L, resources: {host_labels: [gpu]}}
          actor: {target: m:A, count: 4, colocate: {per_process: 2}}
        """
    )
    inv = inventory(("h1", ("gpu",), 2), ("h2", (), None))
    text = format_placement(place(program, inv), program, inv)
    assert text.splitlines() == [
        "placement on 2 host(s)",
        "  host h1  root@10.0.0.1  labels gpu  capacity 2  — 2 executables",
        "    learner",
        "    actor/2-3: actor/2, actor/3",
        "  host h2  root@10.0.0.2  — 1 executable",
        "    actor/0-1: actor/0, actor/1",
    ]


SPREAD = """
name: t
nodes:
  filler: {target: m:F}
  replay: {target: m:R, count: 3, resources: {spread: true}}
"""


def test_a_spread_group_gets_a_host_per_process(compile_text: Any) -> None:
    """h1 has room for one: in file order the filler would take it and two replays
    would share a host; spread places the replays first, one per host."""
    hosts = inventory(("h1", (), 1), ("h2", (), None), ("h3", (), None))
    placement = place(compile_text(SPREAD), hosts)
    assert sorted(placement.host_of(f"replay/{i}") for i in range(3)) == ["h1", "h2", "h3"]
    assert placement.host_of("filler") != "h1"
    plain = place(compile_text(SPREAD.replace(", resources: {spread: true}", "")), hosts)
    assert len({plain.host_of(f"replay/{i}") for i in range(3)}) == 2


def test_a_spread_group_with_more_processes_than_hosts(compile_text: Any) -> None:
    program = compile_text(SPREAD.replace("count: 3, resources", "count: 4, resources"))
    with pytest.raises(TopoError) as info:
        place(program, THREE)
    [d] = info.value.diagnostics
    assert d.message.startswith(
        "group 'replay' sets resources.spread: each of its processes needs a host of its own"
    )
    assert d.pos is not None and d.pos.line == 4
    assert d.hint is not None and "drop spread" in d.hint


def test_relocate_keeps_a_spread_group_apart_while_it_can(compile_text: Any) -> None:
    program = compile_text(
        "name: t\nnodes:\n  r: {target: m:R, count: 2, resources: {spread: true}}\n"
        "  f: {target: m:F, count: 4}\n"
    )
    placement = place(program, THREE)
    lost = placement.host_of("r/0")
    other = placement.host_of("r/1")
    free = ({"h1", "h2", "h3"} - {lost, other}).pop()
    assert placement.relocate("r/0", {"h1", "h2", "h3"} - {lost}) == free
    # with only the other replica's host left, sharing it beats not running
    placement = place(program, THREE)
    assert placement.relocate("r/0", {other}) == other


def test_spread_and_a_host_set_contradict(compile_text: Any) -> None:
    with pytest.raises(TopoError) as info:
        compile_text(
            """
            name: t
            nodes:
              replay: {target: m:R, count: 2, resources: {spread: true}}
              learner: {target: m:L}
            colocation:
              - {name: core, nodes: ["@learner", "@replay[0]"], mode: host}
            """
        )
    [d] = info.value.diagnostics
    assert "group 'replay' sets resources.spread" in d.message and "'core'" in d.message
    assert d.pos is not None and d.pos.line == 3
