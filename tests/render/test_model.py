"""The view graph: what is drawn, how groups collapse and edges aggregate."""

from __future__ import annotations

from collections import Counter

import pytest
from render_programs import SEEDS, acme_colocated, acme_distributed, consumer_producers, mava_dial

from topo.ir import Program, dumps, loads
from topo.render import UnknownGroupError, ViewOptions, build_view, to_dot
from topo.render.model import Box

EXPAND = ViewOptions(expand=True)


def boxes(view_root: Box) -> list[Box]:
    return [b for b in view_root.walk() if b.kind != "root"]


def test_expanded_view_draws_every_ir_node_and_edge(seed: Program) -> None:
    view = build_view(seed, EXPAND)
    assert sorted(view.nodes) == sorted(n.id for n in seed.nodes)
    assert len(view.edges) == len(seed.edges)
    drawn = Counter((e.src, e.dst, e.arg, e.via) for e in view.edges)
    assert drawn == Counter((e.src, e.dst, e.arg, e.via) for e in seed.edges)


def test_every_enabled_group_is_one_cluster(seed: Program) -> None:
    view = build_view(seed, EXPAND)
    groups = [b.name for b in boxes(view.root) if b.kind == "group"]
    assert sorted(groups) == sorted({n.group for n in seed.nodes})


def test_large_group_collapses_into_one_box_with_aggregated_edges() -> None:
    p = acme_distributed(num_actors=64, num_learners=2)
    view = build_view(p)
    actors = [n for n in view.nodes.values() if n.group == "actor"]
    assert len(actors) == 1
    box = actors[0]
    assert box.collapsed and box.count == 64 and box.label == "actor \u00d764"
    out = {(view.nodes[e.dst].label, e.arg): e for e in view.edges if e.src == box.key}
    assert out[("replay", "replay")].count == 64
    assert out[("counter", "counter")].count == 64
    # the round-robin fan: half the actors on each learner
    assert out[("learner", "variable_source")].count == 32
    assert out[("secondary_learner/0", "variable_source")].count == 32
    assert out[("learner", "variable_source")].label == "variable_source \u00d732 · round-robin"
    # nothing lost: the folded counts add up to the IR's edges
    assert sum(e.count for e in view.edges) == len(p.edges)
    assert len(view.nodes) == len(p.nodes) - 64 + 1


def test_round_robin_fan_counts_with_uneven_split() -> None:
    p = acme_distributed(num_actors=64, num_learners=3)
    view = build_view(p)
    fan = {e.dst: e.count for e in view.edges if e.via == "round_robin" and e.src.endswith("*")}
    assert fan == {"learner": 22, "secondary_learner/0": 21, "secondary_learner/1": 21}


def test_collapse_threshold_and_expand() -> None:
    p = acme_distributed(num_actors=8)
    assert not any(n.collapsed for n in build_view(p).nodes.values())
    p9 = acme_distributed(num_actors=9)
    assert any(n.collapsed for n in build_view(p9).nodes.values())
    assert not any(n.collapsed for n in build_view(p9, EXPAND).nodes.values())
    small = build_view(p, ViewOptions(collapse_above=1))
    assert [n.label for n in small.nodes.values() if n.collapsed] == ["actor \u00d78"]


def test_list_of_handles_folds_indices_when_collapsed() -> None:
    p = consumer_producers(num_producers=20)
    view = build_view(p)
    (edge,) = view.edges
    assert edge.arg == "producers[*]" and edge.count == 20
    expanded = build_view(p, EXPAND)
    assert sorted(e.arg for e in expanded.edges) == sorted(f"producers[{i}]" for i in range(20))


def test_disabled_groups_absent_unless_asked() -> None:
    p = acme_distributed(limiter=False)
    assert "steps_limiter" not in {n.group for n in build_view(p).nodes.values()}
    shown = build_view(p, ViewOptions(show_disabled=True))
    (limiter,) = [n for n in shown.nodes.values() if n.group == "steps_limiter"]
    assert limiter.disabled and limiter.count == 0 and limiter.role == "limiter"
    (gbox,) = [b for b in boxes(shown.root) if b.name == "steps_limiter"]
    assert gbox.disabled and "disabled" in gbox.label


def test_thread_set_and_host_placement_nest() -> None:
    view = build_view(acme_colocated())
    (host,) = [b for b in boxes(view.root) if b.kind == "host"]
    assert host.name == "gpu_host"
    (threads,) = host.boxes[:1]
    assert threads.kind == "threads" and threads.name == "learner_replay"
    assert sorted(b.name for b in threads.boxes) == ["learner", "replay"]
    assert [b.name for b in host.boxes[1:]] == ["counter"]
    assert "2 threads" in threads.label


def test_replicas_packed_per_process_get_a_box_each() -> None:
    view = build_view(acme_distributed(num_actors=5, per_process=2))
    (actor,) = [b for b in boxes(view.root) if b.kind == "group" and b.name == "actor"]
    procs = [b for b in actor.boxes if b.kind == "process"]
    assert [b.nodes for b in procs] == [["actor/0", "actor/1"], ["actor/2", "actor/3"]]
    assert actor.nodes == ["actor/4"]  # a process of one is no box


def test_collapsed_group_notes_its_packing() -> None:
    view = build_view(acme_distributed(num_actors=64, per_process=4))
    (actor,) = [n for n in view.nodes.values() if n.collapsed]
    assert actor.detail == "16 procs \u00d7 4 threads"


def test_focus_draws_group_and_neighbours_only() -> None:
    p = mava_dial(num_executors=6, num_caches=2)
    view = build_view(p, ViewOptions(focus="cacher", expand=True))
    assert {n.group for n in view.nodes.values()} == {"cacher", "trainer", "executor"}
    assert all(
        view.nodes[e.src].group == "cacher" or view.nodes[e.dst].group == "cacher"
        for e in view.edges
    )
    assert len(view.edges) == 2 + 6  # cacher -> trainer, executor -> cacher
    assert all(n.neighbour == (n.group != "cacher") for n in view.nodes.values())


def test_unknown_focus_lists_groups() -> None:
    with pytest.raises(UnknownGroupError) as info:
        build_view(mava_dial(), ViewOptions(focus="nosuch"))
    assert info.value.groups == ["replay", "trainer", "cacher", "executor"]


def test_fallback_edges_keep_their_wiring() -> None:
    view = build_view(mava_dial(num_caches=0), EXPAND)
    vias = Counter(e.via for e in view.edges)
    assert vias["fallback"] == 6


@pytest.mark.parametrize("name", sorted(SEEDS))
@pytest.mark.parametrize("opts", [ViewOptions(), EXPAND, ViewOptions(show_disabled=True)])
def test_dot_is_byte_identical_across_runs_and_json_round_trip(
    name: str, opts: ViewOptions
) -> None:
    a = to_dot(build_view(SEEDS[name](), opts))
    b = to_dot(build_view(SEEDS[name](), opts))
    c = to_dot(build_view(loads(dumps(SEEDS[name]())), opts))
    assert a == b == c


def test_round_robin_between_collapsed_groups_says_how_many_targets() -> None:
    view = build_view(mava_dial(num_executors=64, num_caches=16))
    (edge,) = [e for e in view.edges if e.via == "round_robin"]
    assert edge.count == 64 and edge.targets == 16
    assert edge.label == "variable_source \u00d764 · round-robin over 16"
    (source,) = [e for e in view.edges if e.via == "source"]
    assert source.count == 16 and source.targets == 1 and source.label == "source \u00d716"
