"""Conformance: ``topo apply`` on a running program (backends that can update): a group's
count up and down, a changed argument restarted one replica at a time, a group added
and removed -- while a node loops over calls to the whole group and never sees an
error, and every node the change does not touch keeps its process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from topo.testing.suite.harness import NODES, Harness
from topo.testing.waiting import Events, wait_until

EXTRA = f'  extra: {{target: "{NODES}:Worker", args: {{worker_id: 99}}}}\n'


def workers(suite: Harness, n: int, tag: str = "v1", extra: str = "") -> Path:
    """Workers ``worker/0..n-1`` and a looper calling them; ``extra``: more groups."""
    args = f'{{worker_id: "${{replica}}", tag: {tag}}}'
    text = f"""\
name: apply_suite
nodes:
  worker: {{target: "{NODES}:Worker", count: {n}, args: {args}}}
  looper: {{target: "{NODES}:Looper", args: {{workers: "@worker"}}}}
{extra}"""
    return suite.write(text, f"workers-{n}-{tag}-{len(extra)}.yaml")


def pids(run: Any, nodes: list[str]) -> dict[str, int]:
    """Node -> the pid it answers with."""
    return {n: int(run.handle(n, timeout=30).pid()) for n in nodes}


def calls_go_on(run: Any, more: int) -> dict[str, Any]:
    """The looper's stats once it made ``more`` calls more."""
    looper = run.handle("looper", timeout=30)
    start = looper.stats()["calls"]
    return wait_until(  # type: ignore[no-any-return]
        lambda: (s := looper.stats())["calls"] >= start + more and s,
        60,
        what=f"the looper to make {more} calls more",
    )


class Apply:
    """A running program changed: count up/down, rolling restarts, groups in and out."""

    @pytest.mark.slow
    def test_count_up_and_down_keeps_the_other_nodes_and_no_call_fails(
        self, suite: Harness
    ) -> None:
        suite.needs("update")
        events = Events()
        run = suite.launch(workers(suite, 2), listeners=[events])
        kept = pids(run, ["worker/0", "worker/1", "looper"])

        up = run.apply(workers(suite, 4), timeout=240)
        assert up.result == "applied", up.record
        assert up.generation == 1
        stats = calls_go_on(run, 100)
        assert stats["members"] == [f"worker/{i}" for i in range(4)]
        assert set(stats["answered"]) >= {"worker/2", "worker/3"}  # the new ones serve
        assert pids(run, list(kept)) == kept  # nothing the change did not touch restarted
        events.wait_for("log", "worker/3", "worker 3 (v1) up")  # a new node's output is relayed
        assert "worker 3 (v1) up" in run.log("worker/3")
        leaving = pids(run, ["worker/2", "worker/3"])

        down = run.apply(workers(suite, 2, extra="# back to two\n"), timeout=240)
        assert down.result == "applied", down.record
        stats = calls_go_on(run, 50)
        assert stats["members"] == ["worker/0", "worker/1"]
        assert stats["errors"] == []  # not one call failed while the group changed twice
        assert pids(run, list(kept)) == kept
        assert sorted(s.id for s in run.status()) == ["looper", "worker/0", "worker/1"]
        assert not suite.still_running(leaving.values())  # the removed replicas ended
        assert run.stop(timeout=90) == 0
        suite.assert_nothing_left(run, [*kept.values(), *leaving.values()])

    @pytest.mark.slow
    def test_a_changed_argument_restarts_one_replica_at_a_time_and_groups_come_and_go(
        self, suite: Harness
    ) -> None:
        suite.needs("update")
        run = suite.launch(workers(suite, 2))
        looper = pids(run, ["looper"])["looper"]
        before = pids(run, ["worker/0", "worker/1"])

        change = run.apply(workers(suite, 2, tag="v2", extra=EXTRA), timeout=240)
        assert change.result == "applied", change.record
        assert change.record is not None
        restarts = [s["nodes"] for s in change.record["steps"] if s["step"] == "restart"]
        assert restarts == [["worker/0"], ["worker/1"]]  # one replica at a time
        assert [run.handle(f"worker/{i}").work(0)["tag"] for i in range(2)] == ["v2", "v2"]
        after = pids(run, ["worker/0", "worker/1"])
        if looper not in before.values():  # each node a process of its own: new ones
            assert all(after[n] != before[n] for n in before), (before, after)
            assert not suite.still_running(before.values())
        assert {s.id: s.restarts for s in run.status()}["worker/0"] == 0  # not a failure
        assert run.handle("extra", timeout=30).work(1)["id"] == 99  # a group added with it
        extra = pids(run, ["extra"])["extra"]
        removed = run.apply(workers(suite, 2, tag="v2"), timeout=240)
        assert removed.result == "applied", removed.record
        assert "extra" not in {s.id for s in run.status()}
        assert not suite.still_running([extra])
        stats = calls_go_on(run, 50)
        assert stats["errors"] == [] and pids(run, ["looper"])["looper"] == looper
        assert pids(run, ["worker/0", "worker/1"]) == after
        assert run.stop(timeout=90) == 0
        suite.assert_nothing_left(run, [looper, extra, *before.values(), *after.values()])
