"""ProgressWatch: which running nodes count as stalled, and for how long."""

from __future__ import annotations

from topo.supervisor.progress import ProgressWatch
from topo.supervisor.state import NodeStatus


def _running(node: str, started: float = 0.0) -> NodeStatus:
    return NodeStatus(node, "exe", state="running", started=started)


def test_only_nodes_that_reported_progress_are_watched_and_the_mark_clears() -> None:
    watch = ProgressWatch(lambda n: 10.0)
    nodes = {"a": _running("a"), "silent": _running("silent")}
    watch.progressed("a", 1.0)
    assert watch.check(nodes, 5.0) == []
    assert watch.check(nodes, 12.0) == [("a", 11.0)]
    assert nodes["a"].stalled_s == 11.0 and nodes["silent"].stalled_s is None
    assert watch.check(nodes, 13.0) == []  # one change per stall; the time keeps up
    assert nodes["a"].stalled_s == 12.0
    watch.progressed("a", 13.5)
    assert watch.check(nodes, 14.0) == [("a", -12.0)]
    assert nodes["a"].stalled_s is None


def test_a_node_that_usually_reports_rarely_gets_three_of_its_intervals() -> None:
    watch = ProgressWatch(lambda n: 10.0)
    nodes = {"eval": _running("eval")}
    for t in (0.0, 20.0, 40.0):
        watch.progressed("eval", t)
    assert watch.limit("eval") == 60.0
    assert watch.check(nodes, 95.0) == []
    assert watch.check(nodes, 101.0) == [("eval", 61.0)]


def test_a_restarted_node_counts_from_its_new_start_and_zero_turns_it_off() -> None:
    watch = ProgressWatch(lambda n: 0.0 if n == "off" else 10.0)
    nodes = {"a": _running("a", started=50.0), "off": _running("off")}
    watch.progressed("a", 1.0)
    watch.progressed("off", 1.0)
    assert watch.check(nodes, 55.0) == []  # restarted at 50: not stalled yet
    nodes["a"].state = "restarting"
    assert watch.check(nodes, 70.0) == []  # only running nodes stall
    nodes["a"].state = "running"
    assert watch.check(nodes, 70.5) == [("a", 20.5)]
    assert nodes["off"].stalled_s is None
