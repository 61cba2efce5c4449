"""On the ssh backend, across the three test hosts: a node over its group's memory limit
is killed and named as the reason, and a killed node's own processes end with it (the
hosts share this machine's pid space and file system, so both are checked by pid)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.ssh.test_ssh_run import ROOT, topo_run_ssh
from tests.backends.ssh.testhosts import HostSet
from topo.testing import alive, wait_gone

pytestmark = pytest.mark.slow
FAULT_NODES = "tests.faults.fault_nodes"


def test_a_node_over_its_memory_limit_is_killed_on_its_host(
    ssh_hosts: HostSet, tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    path = tmp_path / "leak.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: leak
        nodes:
          leaker:
            target: "{FAULT_NODES}:Leaker"
            count: 3
            args: {{mib_per_s: 120, pid_file: "{tmp_path / "pids"}"}}
            resources: {{memory: 300MiB, spread: true}}
            restart: {{policy: on-failure, max_restarts: 1, backoff: {{initial_s: 0.05}}}}
        """)
    )
    done = subprocess.run(
        topo_run_ssh(path, hosts, tmp_path / "runs"),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out[-3000:]
    killed = re.findall(r"node (leaker/\d) \(pid \d+\) exceeded its memory limit 300 MiB", out)
    assert killed, out[-3000:]
    assert "failed 2 times, giving up" in out, out[-3000:]
    (status,) = (tmp_path / "runs").glob("*-*/status.json")
    record = json.loads(status.read_text())
    assert "exceeded its memory limit 300 MiB" in record["failure"]["message"]
    hosts_of = {n["id"]: n["host"] for n in record["nodes"]}
    assert len(set(hosts_of.values())) == 3  # spread: one leaker per host
    pids = [int(p) for p in (tmp_path / "pids").read_text().split()]
    assert len(pids) >= 4 and not wait_gone(pids, 10)  # 3 first attempts, restarts


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
        end = time.monotonic() + 30
        while time.monotonic() < end:
            status = {s.id: s for s in run.status()}["spawner/1"]
            if status.restarts == 1 and status.state == "running":
                break
            time.sleep(0.1)
        again = run.handle("spawner/1", timeout=30).pids()
        assert alive(again) == again and alive(bystander) == bystander
        assert run.stop(timeout=60) == 0
        assert not wait_gone([*again, *bystander], 10), "nodes' processes outlived the run"
    finally:
        for pid in alive(victim + bystander):
            os.kill(pid, signal.SIGKILL)
