"""What the procs backend does of a group's ``colocate`` and ``resources`` (a program's
lifecycle on every backend: the conformance suite, tests/backends/test_conformance.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


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
    assert len(run.pids()) == 2 + 1  # one process per executable, and the fork server
    assert run.stop(timeout=60) == 0


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
