"""Issue 29 across the ssh test hosts: node states travel to the launcher over the run's
authenticated RPC and are written in its run directory; a resumed run on other hosts
takes them back."""

from __future__ import annotations

import pickle
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.ssh.testhosts import HostSet

pytestmark = pytest.mark.slow
NODES = "tests.snapshots.snap_nodes"


def test_a_snapshot_across_hosts_is_consistent_and_resumes(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    path = tmp_path / "steps.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: steps
        nodes:
          counter: {{target: "topo.nodes:Counter"}}
          stepper:
            count: 3
            target: "{NODES}:Stepper"
            args: {{counter: "@counter"}}
        """)
    )
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=90)
    where = {run.launcher.location(e.id) for e in run.program.executables}
    assert len(where) > 1, where  # the nodes are spread over hosts
    end = time.monotonic() + 60
    while run.handle("stepper/2", timeout=30).status()["steps"] < 20:
        assert time.monotonic() < end
        time.sleep(0.1)
    snap = run.snapshot()
    assert snap.path.is_relative_to(run.run_dir)  # on the launcher's machine
    saved = {n: pickle.loads(snap.state(n)) for n in snap.nodes}
    steps = sum(saved[f"stepper/{i}"]["steps"] for i in range(3))
    assert saved["counter"]["counts"]["steps"] == steps > 0
    assert run.stop(timeout=60) == 0

    again = topo_launch(
        path, "ssh", backend_options={"hosts": hosts}, ready_timeout=90, start_from=snap.path
    )
    for i in range(3):
        status = again.handle(f"stepper/{i}", timeout=30).status()
        assert status["restored_from"] == saved[f"stepper/{i}"]["steps"]
    assert again.handle("counter", timeout=30).get_counts()["steps"] >= steps
    assert again.stop(timeout=60) == 0
