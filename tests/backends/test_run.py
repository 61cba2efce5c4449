"""Programs that run to a clean stop, on both backends, through ``topo.launch``."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from topo.testing import wait_gone

ROOT = Path(__file__).resolve().parents[2]
CONSUMER_PRODUCERS = ROOT / "examples" / "topologies" / "consumer_producers.yaml"


def test_consumer_producers_stops_by_itself(topo_launch: Callable, backend: str) -> None:
    run = topo_launch(CONSUMER_PRODUCERS, backend, params={"num_producers": 3, "work_items": 12})
    assert run.wait(60) == 0
    assert "12 results from 3 producers" in run.log("consumer")
    status = json.loads((run.run_dir / "status.json").read_text())
    assert status["exit_code"] == 0
    assert "consumer finished" in status["stop_reason"]
    assert {n["state"] for n in status["nodes"]} == {"finished"}
    assert (run.run_dir / "program.json").is_file()
    assert "num_producers" in (run.run_dir / "topology.yaml").read_text()
    assert not wait_gone(run.pids(), 15)
    if backend == "procs":  # one process per executable, plus the fork server
        assert len(run.pids()) == 3 + 1 + 1


def test_handles_with_run_disabled(topo_launch: Callable, backend: str) -> None:
    run = topo_launch(CONSUMER_PRODUCERS, backend, disable_run=True, ready_timeout=60)
    producer = run.handle("producer/2")
    assert isinstance(producer.work(5), int)
    assert producer.stats() == {"producer_id": 2, "done": 1}
    assert run.handle("consumer").get_result() is None  # run() was not called
    assert run.stop(timeout=60) == 0


def test_topo_stop_from_a_node_and_py_nodes(
    topo_launch: Callable, topology: Callable, backend: str
) -> None:
    path = topology("""
        name: stopper
        nodes:
          echo: {target: "bk_nodes:Echo", count: 2}
          greeter: {kind: py, target: "bk_nodes:hello", args: {greeting: hi}}
          stopper: {target: "bk_nodes:Stopper", args: {peers: "@echo"}}
    """)
    run = topo_launch(path, backend)
    assert run.wait(60) == 0
    assert run.launcher.state.stop_reason.startswith("stopper is done")
    assert "answers: ['pong', 'pong']" in run.log("stopper")
    assert "hi from greeter" in run.log("greeter")


def test_colocated_nodes_share_a_process(topo_launch: Callable, topology: Callable) -> None:
    path = topology("""
        name: coloc
        nodes:
          echo:
            target: "bk_nodes:Echo"
            count: 4
            colocate: {per_process: 2}
    """)
    run = topo_launch(path, "procs", ready_timeout=60)
    ids = [run.handle(f"echo/{i}").whoami() for i in range(4)]
    assert [i for i, _ in ids] == [f"echo/{i}" for i in range(4)]
    assert ids[0][1] == ids[1][1] != ids[2][1] == ids[3][1]
    assert len(run.launcher.pids()) == 2
    assert run.stop(timeout=60) == 0


def test_stubborn_node_is_killed_after_grace(
    topo_launch: Callable, topology: Callable, backend: str
) -> None:
    path = topology("""
        name: stubborn
        nodes:
          stubborn: {target: "bk_nodes:Stubborn"}
    """)
    run = topo_launch(path, backend, grace_s=0.5, ready_timeout=60)
    assert run.stop(timeout=60) == 0
    assert any("grace period" in w for w in run.launcher.state.warnings)
    assert not wait_gone(run.pids(), 15)


def test_group_resources_apply_in_the_child(
    topo_launch: Callable, topology: Callable, tmp_path: Path
) -> None:
    workdir = tmp_path / "work"
    path = topology(f"""
        name: resources
        nodes:
          echo:
            target: "bk_nodes:Echo"
            resources: {{env: {{TOPO_TEST_VAR: "42"}}, workdir: "{workdir}", cpus: [0]}}
    """)
    run = topo_launch(path, "procs", ready_timeout=60)
    echo = run.handle("echo")
    assert echo.env("TOPO_TEST_VAR") == "42"
    assert echo.cwd() == str(workdir)
    import psutil

    assert psutil.Process(run.launcher.pids()["echo"]).cpu_affinity() == [0]
    assert run.stop(timeout=60) == 0
