"""The Reverb replay across the ssh test hosts: reachable only through topo's keys.

The replay runs on one host, an actor-like feeder on a second and a learner-like
sampler on the third; an attacker on the feeder's host, without the program's keys,
tries Reverb's read, insert and reset on every port the replay's host listens on."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from tests.backends.ssh.testhosts import HostSet
from topo.testing import wait_gone, wait_until

ROOT = Path(__file__).resolve().parents[3]
ATTACK = ROOT / "tests" / "nodes" / "reverb_attack.py"
TARGETS = "tests.backends.ssh.reverb_targets"
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("reverb") is None, reason="needs reverb"),
]


def _topology(tmp_path: Path, restart: bool = False, bystander: bool = False) -> Path:
    again = "restart: {policy: on-failure, max_restarts: 2, backoff: {initial_s: 0.05}}"
    path = tmp_path / "rv.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: rv_hosts
        nodes:
          replay:
            kind: reverb
            tables: "{TARGETS}:make_tables"
            resources: {{host_labels: [replay]}}
            {again if restart else ""}
          feeder:
            target: "{TARGETS}:Feeder"
            args: {{replay: "@replay"}}
            resources: {{host_labels: [feed]}}
            # Reverb's writer may abort its process when its server is killed under
            # it (so does it on an open port): the feeder restarts, as Acme's actors.
            {again if restart else ""}
          sampler:
            target: "{TARGETS}:Sampler"
            args: {{replay: "@replay"}}
            resources: {{host_labels: [learn]}}
          {BYSTANDER if bystander else ""}
        """)
    )
    return path


BYSTANDER = f"""bystander:
            target: "{TARGETS}:Bystander"
            args: {{feeder: "@feeder"}}
            resources: {{host_labels: [feed]}}"""


def _launch(  # type: ignore[no-untyped-def]
    topo_launch: Callable, hosts: HostSet, tmp_path: Path, restart: bool = False, **kw: bool
):
    labels = {"topo-h1": ["replay"], "topo-h2": ["feed"], "topo-h3": ["learn"]}
    inventory = hosts.inventory(
        tmp_path / "hosts.yaml", hosts={h: {"labels": v} for h, v in labels.items()}
    )
    path = _topology(tmp_path, restart, **kw)
    return topo_launch(path, "ssh", backend_options={"hosts": inventory}, ready_timeout=180)


def _listening_ports(netns: str) -> set[int]:
    out = subprocess.run(
        ["ip", "netns", "exec", netns, "ss", "-ltnH"], capture_output=True, text=True, check=True
    ).stdout
    return {int(line.split()[3].rpartition(":")[2]) for line in out.splitlines() if line.strip()}


def _grows(read: Callable[[], int], within_s: float = 60.0) -> bool:
    first = read()
    try:
        wait_until(lambda: read() > first, within_s, every=0.2)
    except AssertionError:
        return False
    return True


def _jail_pids(pid: int) -> list[int]:
    try:
        return [c.pid for c in psutil.Process(pid).children()]
    except psutil.NoSuchProcess:
        return []


def test_reverb_attack_from_another_host_fails_and_the_run_goes_on(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    run = _launch(topo_launch, ssh_hosts, tmp_path)
    sampler, feeder = run.handle("sampler", timeout=60), run.handle("feeder", timeout=60)
    assert (sampler.host(), feeder.host()) == ("topo-h3", "topo-h2")
    assert _grows(sampler.count), "the sampler never sampled"
    doors = run.handle("replay", timeout=60).doors()
    assert doors["isolated"] is True and doors["host"] == "10.213.0.11"
    # The sampler's reverb.Client uses an entrance of its own process, not the replay's
    # Unix socket (that is on another host).
    assert sampler.address().startswith("unix-abstract:topo-")
    ports = _listening_ports("topo-h1")
    assert doors["port"] in ports  # the gateway: the only door across hosts
    jails = _jail_pids(run.launcher.pids()["replay"])
    assert len(jails) == 1
    size_before, largest_before = sampler.size(), sampler.largest()
    targets = [f"10.213.0.11:{port}" for port in sorted(ports)]
    attack = subprocess.run(
        ["ip", "netns", "exec", "topo-h2", sys.executable, str(ATTACK), "uniform", *targets],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    results = json.loads(attack.stdout.strip().splitlines()[-1])
    assert set(results) == set(targets)
    worked = {a: s for a, r in results.items() for s, v in r.items() if v == "ok"}
    assert not worked, f"the attacker got through: {worked} ({results})"
    # The run goes on: the learner-like sampler still samples, nothing was wiped or forged.
    assert _grows(sampler.count) and _grows(feeder.count)
    assert sampler.size() >= size_before > 0
    assert largest_before <= sampler.largest() < 1e6
    assert run.exit_code is None
    assert run.stop(timeout=60) == 0
    assert not wait_gone(jails, 15)


def test_a_restarted_replay_keeps_its_gateway_and_peers_on_other_hosts_go_on(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    run = _launch(topo_launch, ssh_hosts, tmp_path, restart=True)
    sampler = run.handle("sampler", timeout=60)
    assert _grows(sampler.count), "the sampler never sampled"
    replay = run.handle("replay", timeout=60)
    first, address = replay.doors(), sampler.address()
    victim = run.launcher.pids()["replay"]
    jails = _jail_pids(victim)
    os.kill(victim, signal.SIGKILL)
    assert not wait_gone([victim, *jails], 15)  # its server's process went with it
    nodes = run.launcher.state.nodes
    wait_until(
        lambda: nodes["replay"].restarts >= 1 and nodes["replay"].state == "running",
        120,
        what="the replay to restart",
    )
    assert replay.doors() == first  # the same socket path and gateway port
    # Peers on the other hosts reconnect by themselves, at the address they had: the
    # feeder's items arrive in the new (empty) replay, the sampler samples them.
    assert _grows(sampler.size, 120) and _grows(sampler.count, 120)
    assert sampler.address() == address
    assert run.exit_code is None
    new_jails = _jail_pids(run.launcher.pids()["replay"])
    assert run.stop(timeout=60) == 0
    assert not wait_gone(new_jails, 15)


def test_a_node_not_wired_to_the_replay_cannot_reach_it_until_passed_its_handle(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    """Least privilege reaches the replay too: the gateway asks for the right to call
    the reverb node, as its topo RPC server does."""
    run = _launch(topo_launch, ssh_hosts, tmp_path, bystander=True)
    sampler = run.handle("sampler", timeout=60)
    assert _grows(sampler.count), "the sampler never sampled"
    gateway = run.handle("replay", timeout=60).doors()["gateway"]
    bystander = run.handle("bystander", timeout=120)
    tried = bystander.try_replay(gateway)
    assert set(tried) == {"feeder's token", "no token"}
    assert not [k for k, v in tried.items() if v.startswith("ok")], tried
    # A handle passed in a call carries the right: through it the bystander reads.
    assert bystander.size_through(run.handle("replay")) > 0
    assert _grows(sampler.count)
    assert run.stop(timeout=60) == 0
