"""``topo apply`` on threads and procs: a group's count up and down, a changed argument
(rolling restart), a group added and one removed, refusals and dry runs -- while a caller
loops over a handle to the whole group and must never see an error, and every node the
change does not touch keeps its process."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo.api import ApplyNeedsConfirmation, ApplyRefused, RunningProgram
from topo.testing import wait_gone

BACKENDS = ["threads", "procs"]


def _workers(topology: Callable[..., Path], n: int, tag: str = "v1", name: str = "") -> Path:
    return topology(
        f"""
        name: apply_test
        nodes:
          worker:
            target: apply_nodes:Worker
            count: {n}
            args: {{worker_id: "${{replica}}", tag: {tag}}}
          caller:
            target: apply_nodes:Caller
            args: {{workers: "@worker"}}
        """,
        name or f"workers-{n}-{tag}.yaml",
    )


def _pids(run: RunningProgram, nodes: list[str]) -> dict[str, int]:
    return {n: run.handle(n).pid() for n in nodes}


def _calls_go_on(run: RunningProgram, more: int = 50, timeout: float = 30) -> dict[str, Any]:
    """Wait until the caller made ``more`` calls more; its stats then."""
    caller = run.handle("caller")
    start = caller.stats()["calls"]
    end = time.monotonic() + timeout
    while True:
        stats = caller.stats()
        if stats["calls"] >= start + more or time.monotonic() > end:
            return stats
        time.sleep(0.05)


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_count_up_and_down_keeps_the_others_running_and_the_caller_never_fails(
    topology: Callable[..., Path], topo_launch: Callable[..., RunningProgram], backend: str
) -> None:
    lines: list[tuple[str | None, str]] = []
    run = topo_launch(
        _workers(topology, 2),
        backend,
        listeners=[lambda e: lines.append((e.node, e.message)) if e.kind == "log" else None],
    )
    assert run.wait_ready(60)
    kept = _pids(run, ["worker/0", "worker/1", "caller"])

    up = run.apply(_workers(topology, 6))
    assert up.result == "applied", up.record
    assert up.generation == 1 and run.launcher.state.generation == 1
    stats = _calls_go_on(run, 200)
    assert stats["members"] == [f"worker/{i}" for i in range(6)]
    assert set(stats["answered"]) >= {f"worker/{i}" for i in range(2, 6)}  # the new ones serve
    assert _pids(run, list(kept)) == kept  # nothing that did not change was restarted
    end = time.monotonic() + 10
    while ("worker/5", "worker 5 (v1) up") not in lines and time.monotonic() < end:
        time.sleep(0.05)
    assert ("worker/5", "worker 5 (v1) up") in lines  # a new node's output is shown
    leaving = _pids(run, [f"worker/{i}" for i in range(2, 6)])

    down = run.apply(_workers(topology, 2, name="back-to-2.yaml"))
    assert down.result == "applied", down.record
    stats = _calls_go_on(run, 100)
    assert stats["members"] == ["worker/0", "worker/1"]
    assert stats["errors"] == []  # not one call failed while the group changed twice
    assert _pids(run, list(kept)) == kept
    assert sorted(run.launcher.state.nodes) == ["caller", "worker/0", "worker/1"]
    if backend == "procs":  # the removed replicas' processes are gone
        assert not wait_gone(leaving.values(), 10)
    recorded = (run.run_dir / "changes" / "2.json").read_text()
    assert '"result": "applied"' in recorded and "worker/2" in recorded


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_changed_argument_restarts_the_group_one_replica_at_a_time(
    topology: Callable[..., Path], topo_launch: Callable[..., RunningProgram], backend: str
) -> None:
    run = topo_launch(_workers(topology, 3), backend)
    assert run.wait_ready(60)
    caller_pid = run.handle("caller").pid()
    change = run.apply(_workers(topology, 3, tag="v2"))
    assert change.result == "applied", change.record
    assert change.record is not None
    restarts = [s for s in change.record["steps"] if s["step"] == "restart"]
    assert [s["nodes"] for s in restarts] == [["worker/0"], ["worker/1"], ["worker/2"]]
    assert [run.handle(f"worker/{i}").work(0)["tag"] for i in range(3)] == ["v2"] * 3
    stats = _calls_go_on(run, 100)
    assert stats["errors"] == [] and stats["pid"] == caller_pid
    assert run.launcher.state.nodes["worker/0"].restarts == 0  # a change is not a failure


@pytest.mark.slow
def test_max_unavailable_restarts_that_many_at_a_time(
    topology: Callable[..., Path], topo_launch: Callable[..., RunningProgram]
) -> None:
    run = topo_launch(_workers(topology, 4), "threads")
    assert run.wait_ready(60)
    change = run.apply(_workers(topology, 4, tag="v3"), max_unavailable=2)
    assert change.record is not None and change.result == "applied"
    restarts = [s["nodes"] for s in change.record["steps"] if s["step"] == "restart"]
    assert restarts == [["worker/0", "worker/1"], ["worker/2", "worker/3"]]
    assert run.handle("caller").stats()["errors"] == []


@pytest.mark.slow
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_group_added_and_a_group_removed(
    topology: Callable[..., Path], topo_launch: Callable[..., RunningProgram], backend: str
) -> None:
    with_extra = topology(
        """
        name: apply_test
        nodes:
          worker: {target: apply_nodes:Worker, count: 2, args: {worker_id: "${replica}", tag: v1}}
          caller: {target: apply_nodes:Caller, args: {workers: "@worker"}}
          extra: {target: apply_nodes:Worker, args: {worker_id: 99}}
        """,
        "extra.yaml",
    )
    run = topo_launch(_workers(topology, 2), backend)
    assert run.wait_ready(60)
    kept = _pids(run, ["worker/0", "worker/1", "caller"])
    added = run.apply(with_extra)
    assert added.result == "applied", added.record
    assert run.handle("extra").work(1)["id"] == 99
    extra_pid = run.handle("extra").pid()
    removed = run.apply(_workers(topology, 2, name="no-extra.yaml"))
    assert removed.result == "applied", removed.record
    assert "extra" not in run.launcher.state.nodes and "extra" not in run.program.node_index
    assert _pids(run, list(kept)) == kept
    if backend == "procs":
        assert not wait_gone([extra_pid], 10)
    assert run.handle("caller").stats()["errors"] == []


@pytest.mark.slow
def test_a_refused_change_and_a_dry_run_change_nothing(
    topology: Callable[..., Path], topo_launch: Callable[..., RunningProgram]
) -> None:
    text = """
        name: NAME
        colocation:
          - {nodes: ["@worker[WHO]", "@caller"], name: together}
        nodes:
          worker: {target: apply_nodes:Worker, count: COUNT, args: {worker_id: "${replica}"}}
          caller: {target: apply_nodes:Caller, args: {workers: "@worker"}}
        """

    def variant(name: str = "apply_test", who: int = 0, count: int = 2) -> Path:
        body = text.replace("NAME", name).replace("WHO", str(who)).replace("COUNT", str(count))
        return topology(body, f"{name}-{who}-{count}.yaml")

    run = topo_launch(variant(), "procs")
    assert run.wait_ready(60)
    before = _pids(run, ["worker/0", "worker/1", "caller"])
    with pytest.raises(ApplyRefused, match="thread colocation set 'together' would change"):
        run.apply(variant(who=1))  # the set keeps its name but would hold another replica
    with pytest.raises(ApplyRefused, match="name changes"):
        run.apply(variant(name="other"))
    dry = run.apply(variant(count=5), dry_run=True)
    assert dry.result == "planned" and len(dry.plan.start) == 3
    assert run.launcher.state.generation == 0 and sorted(run.launcher.state.nodes) == sorted(before)
    assert _pids(run, list(before)) == before
    assert not (run.run_dir / "changes").exists()


@pytest.mark.slow
def test_a_new_node_that_cannot_start_fails_the_change_not_the_run(
    topology: Callable[..., Path], topo_launch: Callable[..., RunningProgram]
) -> None:
    run = topo_launch(_workers(topology, 1), "threads")
    assert run.wait_ready(60)
    broken = topology(
        """
        name: apply_test
        nodes:
          worker: {target: apply_nodes:Worker, count: 1, args: {worker_id: "${replica}"}}
          caller: {target: apply_nodes:Caller, args: {workers: "@worker"}}
          broken:
            target: apply_nodes:Broken
            restart: {policy: on-failure, max_restarts: 1000}
        """,
        "broken.yaml",
    )
    change = run.apply(broken, timeout=60)
    assert change.result == "failed", change.record
    assert change.record is not None and "broken" in change.record["error"]
    assert run.launcher.phase == "running"  # the run goes on
    assert run.handle("caller").stats()["errors"] == []


@pytest.mark.slow
@pytest.mark.parametrize("fresh", [False, True])
def test_a_restarted_node_keeps_its_state_unless_fresh(
    topology: Callable[..., Path], topo_launch: Callable[..., RunningProgram], fresh: bool
) -> None:
    def tally(step: int) -> Path:
        text = f"""
            name: apply_test
            nodes:
              tally: {{target: apply_nodes:Tally, args: {{step: {step}}}}}
            """
        return topology(text, f"tally-{step}.yaml")

    run = topo_launch(tally(1), "procs")
    assert run.wait_ready(60)
    for _ in range(5):
        run.handle("tally").add()
    if fresh:  # its state would be lost: refused unless confirmed
        with pytest.raises(ApplyNeedsConfirmation, match="tally keeps a state"):
            run.apply(tally(10), fresh=True)
        assert run.launcher.state.generation == 0 and run.handle("tally").count() == 5
    change = run.apply(tally(10), fresh=fresh, confirm=fresh)
    assert change.result == "applied", change.record
    assert run.handle("tally").count() == (0 if fresh else 5)
    assert run.handle("tally").add() == (10 if fresh else 15)  # the new definition's step


@pytest.mark.slow
def test_a_file_applied_from_python_starts_from_the_runs_parameters(
    topology: Callable[..., Path], topo_launch: Callable[..., RunningProgram]
) -> None:
    file = topology(
        """
        name: apply_test
        params:
          n: {default: 2}
          tag: {default: v1}
        nodes:
          worker:
            target: apply_nodes:Worker
            count: ${n}
            args: {worker_id: "${replica}", tag: "${tag}"}
          caller: {target: apply_nodes:Caller, args: {workers: "@worker"}}
        """,
        "params.yaml",
    )
    run = topo_launch(file, "threads", params={"n": 3})
    assert run.wait_ready(60)
    change = run.apply(file, {"tag": "v2"})  # n=3 carried: three workers, each restarted
    assert change.result == "applied", change.record
    assert change.plan.stop == () and len(change.plan.restart) == 3
    assert run.launcher.params_given == ["n=3", "tag=v2"]
    assert [run.handle(f"worker/{i}").work(0)["tag"] for i in range(3)] == ["v2"] * 3
    back = run.apply(file, reset_params=True)  # the file's defaults: n=2, tag=v1
    assert back.result == "applied", back.record
    assert sorted(run.launcher.state.nodes) == ["caller", "worker/0", "worker/1"]
    assert run.launcher.params_given == []
