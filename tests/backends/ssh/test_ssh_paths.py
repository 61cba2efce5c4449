"""Where the ssh backend's hosts find the project and leave the run's files, on the real
test hosts: ``--ship`` to hosts that share one workdir (a shared home, NFS), a run
started from another directory than the project's, and each host's run directory
removed at the end (the logs are in the launcher's run directory by then)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.backends.ssh.testhosts import HostSet

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow


def _run_ssh(
    topology: Path, hosts: Path, runs: Path, cwd: Path, *extra: str
) -> subprocess.CompletedProcess[str]:
    """``topo run TOPOLOGY -b ssh --hosts HOSTS`` from ``cwd`` (piped output)."""
    argv = [sys.executable, "-m", "topo", "run", str(topology), "-b", "ssh", "--hosts"]
    argv += [str(hosts), "--no-live", "--log-dir", str(runs), *extra]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's topo, here and there
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=180, env=env)


def _project(at: Path) -> Path:
    """A project whose node prints the file it was imported from, on each of 3 hosts."""
    (at / "shipped").mkdir(parents=True)
    (at / "shipped" / "__init__.py").write_text("")
    (at / "shipped" / "nodes.py").write_text(
        textwrap.dedent("""
        import socket

        class Report:
            def run(self):
                print("running", __file__, "on", socket.gethostname(), flush=True)
        """)
    )
    topology = at / "t.yaml"
    topology.write_text(
        'name: shipped\nnodes:\n  report: {target: "shipped.nodes:Report", count: 3}\n'
    )
    return topology


def test_ship_to_hosts_that_share_their_workdir(ssh_hosts: HostSet, tmp_path: Path) -> None:
    """All three hosts unpack into one shared workdir at once: each run succeeds, every
    host imports the one tree named by its content, a second run finds it there, and no
    archive or half-unpacked copy is left."""
    topology = _project(tmp_path / "project")
    workdir = tmp_path / "shared"  # every test host sees this same directory
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", workdir=str(workdir))
    trees = []
    for attempt in range(2):
        done = _run_ssh(topology, hosts, tmp_path / "runs", topology.parent, "--ship")
        assert done.returncode == 0, f"run {attempt}: " + done.stdout[-3000:] + done.stderr[-3000:]
        lines = [x for x in done.stdout.splitlines() if "running" in x]
        assert {x.split()[-1] for x in lines} == set(ssh_hosts.names), done.stdout
        found = {x.split("running ", 1)[1].split("/shipped/nodes.py")[0] for x in lines}
        assert len(found) == 1, found  # one tree for all three hosts
        trees.append(found.pop())
    assert trees[0] == trees[1]  # the unchanged project is not copied again
    assert re.fullmatch(rf"{re.escape(str(workdir))}/project-[0-9a-f]{{16}}", trees[0]), trees
    assert sorted(p.name for p in workdir.iterdir()) == [Path(trees[0]).name, "runs"]
    assert list((workdir / "runs").iterdir()) == []  # each run's directory removed
    # A changed project gets a tree of its own beside the first one (which a run may use).
    (topology.parent / "shipped" / "extra.py").write_text("X = 1\n")
    done = _run_ssh(topology, hosts, tmp_path / "runs", topology.parent, "--ship")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert len([p for p in workdir.iterdir() if p.name.startswith("project-")]) == 2


def test_a_run_started_from_another_directory_finds_its_targets_on_the_hosts(
    ssh_hosts: HostSet, tmp_path: Path
) -> None:
    """``topo run /path/to/repo/examples/...yaml`` from elsewhere: the hosts import the
    targets from the folder above the topology file that holds them, as procs does."""
    workdir = tmp_path / "work"
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", workdir=str(workdir))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    topology = ROOT / "examples" / "topologies" / "consumer_producers.yaml"
    done = _run_ssh(topology, hosts, tmp_path / "runs", elsewhere, "-p", "num_producers=5")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "32 results from 5 producers" in done.stdout
    [run_dir] = [p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]
    status = json.loads((run_dir / "status.json").read_text())
    assert {n["host"] for n in status["nodes"]} == set(ssh_hosts.names)
    # Each host's run directory is gone; what the agents said is here.
    assert list((workdir / "runs").iterdir()) == []
    for host in ssh_hosts.names:
        assert "topo agent: ending" in (run_dir / "agents" / f"{host}.log").read_text()
