"""On the ssh backend, across the three test hosts: a killed node's own processes end with
it (the hosts share this machine's pid space and file system, so it is checked by pid).
A node over its group's memory limit is ended and named on every backend that holds
one: the conformance suite (test_ssh_conformance.py)."""

from __future__ import annotations

import os
import signal
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.ssh.testhosts import HostSet
from topo.testing import alive, wait_gone, wait_until

pytestmark = pytest.mark.slow
FAULT_NODES = "tests.faults.fault_nodes"


def test_a_killed_remote_node_takes_its_processes(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    path = tmp_path / "spawn.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: spawn
        nodes:
          spawner:
            target: "{FAULT_NODES}:Spawner"
            count: 3
            resources: {{spread: true}}
            restart: {{policy: on-failure, max_restarts: 2, backoff: {{initial_s: 0.1}}}}
        """)
    )
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=60)
    victim = run.handle("spawner/1", timeout=30).pids()
    bystander = run.handle("spawner/0", timeout=30).pids()
    try:
        assert alive(victim) == victim
        exe_pid = {s.id: s.pid for s in run.status()}["spawner/1"]
        assert exe_pid is not None
        os.kill(exe_pid, signal.SIGKILL)
        assert not wait_gone(victim, 10), "a killed remote node's processes outlived it"
        wait_until(
            lambda: (
                (s := {s.id: s for s in run.status()}["spawner/1"]).restarts == 1
                and s.state == "running"
            ),
            60,
            what="spawner/1 restarted",
        )
        again = run.handle("spawner/1", timeout=30).pids()
        assert alive(again) == again and alive(bystander) == bystander
        assert run.stop(timeout=60) == 0
        assert not wait_gone([*again, *bystander], 10), "nodes' processes outlived the run"
    finally:
        for pid in alive(victim + bystander):
            os.kill(pid, signal.SIGKILL)
