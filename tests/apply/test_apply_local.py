"""``topo apply`` on threads and procs where they have cases of their own: restarts
``max_unavailable`` at a time, refusals and dry runs, a new node that cannot start, state
kept or not across a restart, parameters carried -- while a caller loops over a handle to
the whole group and must never see an error. Count up and down, rolling restarts and
groups added and removed, on every backend: the conformance suite
(tests/backends/test_conformance.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from topo.api import ApplyNeedsConfirmation, ApplyRefused, RunningProgram


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
