"""The seed programs on the slurm backend, inside an allocation of both nodes of the test
cluster: every one runs across the job's nodes and ends by itself, exit 0, and the RL
ones learn there within the learning tests' budgets and bounds (tests/agents/learning.py:
DQN distributed and colocated, offline DQN, DIAL), as on procs and threads. And the
Reverb replay sits behind its door there: a client on the replay's node without the
program's keys reads, inserts and wipes nothing, while the program's own feeder and
sampler go on."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.agents.learning import (
    DIAL,
    OFFLINE,
    SMALL,
    assert_dial_learned,
    assert_learned,
    assert_offline_learned,
)
from tests.backends.slurm.conftest import Allocation
from topo.testing import wait_until

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples" / "topologies"
ATTACK = ROOT / "tests" / "nodes" / "reverb_attack.py"
TARGETS = "tests.backends.ssh.reverb_targets"
RL = all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax"))
needs_rl = pytest.mark.skipif(not RL, reason="needs the rl and reverb extras")
SEEDS = [  # the RL programs with the learning tests' budgets (tests/agents/learning.py)
    pytest.param("consumer_producers", {}, id="consumer_producers"),
    pytest.param(
        "acme_distributed", {**SMALL, "num_actors": 2}, id="acme_distributed", marks=needs_rl
    ),
    pytest.param("acme_colocated", SMALL, id="acme_colocated", marks=needs_rl),
    pytest.param("acme_offline", OFFLINE, id="acme_offline", marks=needs_rl),
    pytest.param("mava_dial", {**DIAL, "num_caches": 1}, id="mava_dial", marks=needs_rl),
]


@pytest.fixture
def in_job(slurm_allocation: Allocation, monkeypatch: pytest.MonkeyPatch) -> Allocation:
    """This process inside the allocation (``topo.launch`` runs here)."""
    env = slurm_allocation.env()
    for key in ("SLURM_CONF", "SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        monkeypatch.setenv(key, env[key])
    return slurm_allocation


@pytest.mark.parametrize(("name", "params"), SEEDS)
def test_every_seed_program_runs_across_the_job_and_ends_by_itself(
    in_job: Allocation, topo_launch: Callable[..., Any], name: str, params: dict, tmp_path: Path
) -> None:
    if name == "acme_offline":
        params = {**params, "dataset_path": str(tmp_path / "data" / "episodes.npz")}
    run = topo_launch(EXAMPLES / f"{name}.yaml", "slurm", params=params, ready_timeout=180)
    assert run.wait(300) == 0, run.failure
    status = json.loads((run.run_dir / "status.json").read_text())
    nodes = {n["host"] for n in status["nodes"]}
    assert nodes == {"n1", "n2"}, status["nodes"]  # the program spans the job's nodes
    if name in ("acme_distributed", "acme_colocated"):
        print(f"{name} on slurm: evaluations {assert_learned(run.log('evaluator/0'))}")
    elif name == "acme_offline":
        print(f"{name} on slurm: final return {assert_offline_learned(run.log('evaluator/0'))}")
    elif name == "mava_dial":
        reward = assert_dial_learned(run.log("evaluator"), run.run_dir / "metrics")
        print(f"{name} on slurm: final normalised reward {reward}")


def _replay(tmp_path: Path) -> Path:
    path = tmp_path / "rv.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: rv_slurm
        nodes:
          replay:
            kind: reverb
            tables: "{TARGETS}:make_tables"
            resources: {{host_labels: [rack1]}}
          feeder:
            target: "{TARGETS}:Feeder"
            args: {{replay: "@replay"}}
            resources: {{host_labels: [rack2]}}
          sampler:
            target: "{TARGETS}:Sampler"
            args: {{replay: "@replay"}}
            resources: {{host_labels: [rack2]}}
        """)
    )
    return path


def _grows(read: Callable[[], int], within_s: float = 60.0) -> None:
    first = read()
    wait_until(lambda: read() > first, within_s, every=0.2, what="a count to grow")


def _listening(pids: set[int]) -> set[int]:
    """The TCP ports processes ``pids`` listen on, read in their own network namespaces
    (``/proc/PID/net/tcp``: the Slurm nodes are test hosts of their own, whose sockets
    this process's ``/proc/net`` does not list; and the replay's jail, in a namespace of
    its own, holds the gateway's socket of the node's)."""
    inodes: set[str] = set()
    rows: list[list[str]] = []
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
            for table in ("tcp", "tcp6"):
                lines = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
                rows += [line.split() for line in lines]
        except OSError:  # (gone)
            continue
        for fd in fds:
            with contextlib.suppress(OSError):  # (closed meanwhile)
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[len("socket:[") : -1])
    # sl local rem st tx:rx tr:when retrnsmt uid timeout inode; st 0A: LISTEN
    return {int(w[1].rsplit(":", 1)[1], 16) for w in rows if w[3] == "0A" and w[9] in inodes}


@needs_rl
def test_the_replay_on_slurm_gives_a_keyless_client_nothing(
    in_job: Allocation, topo_launch: Callable[..., Any], tmp_path: Path
) -> None:
    run = topo_launch(_replay(tmp_path), "slurm", ready_timeout=180)
    sampler, feeder = run.handle("sampler", timeout=60), run.handle("feeder", timeout=60)
    _grows(sampler.count)
    doors = run.handle("replay", timeout=60).doors()
    assert doors["isolated"] is True
    status = json.loads((run.run_dir / "status.json").read_text())
    (replay,) = [n for n in status["nodes"] if n["id"] == "replay"]
    assert replay["host"] == "n1"
    proc = psutil.Process(int(replay["pid"]))
    pids = {proc.pid, *(c.pid for c in proc.children(recursive=True))}
    ports = _listening(pids)
    assert doors["port"] in ports  # the gateway: the replay's door across nodes
    size_before, largest_before = sampler.size(), sampler.largest()
    targets = [f"{doors['host']}:{port}" for port in sorted(ports)]
    attack = subprocess.run(
        [sys.executable, str(ATTACK), "uniform", *targets],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    results = json.loads(attack.stdout.strip().splitlines()[-1])
    assert set(results) == set(targets)
    worked = {a: s for a, r in results.items() for s, v in r.items() if v == "ok"}
    assert not worked, f"a client without the keys got through: {worked} ({results})"
    _grows(sampler.count)  # the program goes on, nothing wiped or forged
    _grows(feeder.count)
    assert sampler.size() >= size_before > 0
    assert largest_before <= sampler.largest() < 1e6
    assert run.stop(timeout=60) == 0
