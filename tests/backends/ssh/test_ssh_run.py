"""The ssh backend end to end on three real SSH hosts (network namespaces, one sshd
each): programs run across hosts, placement is honoured, hosts are checked before
anything starts, failures follow the restart policy, and nothing is left on a host."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.ssh.conftest import wait_no_strays
from tests.backends.ssh.testhosts import HostSet
from topo.diagnostics import TopoError
from topo.testing import wait_until

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.slow
NODES = "tests.backends.ssh.ssh_nodes"


def topo_run_ssh(topology: object, hosts: Path, log_dir: Path, *extra: str) -> list[str]:
    """The command line of ``topo run TOPOLOGY --backend ssh --hosts HOSTS`` (piped output)."""
    return [
        sys.executable,
        "-m",
        "topo",
        "run",
        str(topology),
        "--backend",
        "ssh",
        "--hosts",
        str(hosts),
        "--no-live",
        "--log-dir",
        str(log_dir),
        *extra,
    ]


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def test_consumer_producers_runs_across_hosts(ssh_hosts: HostSet, tmp_path: Path) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    argv = topo_run_ssh(
        "examples/topologies/consumer_producers.yaml",
        hosts,
        tmp_path / "runs",
        "-p",
        "num_producers=5",
    )
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "32 results from 5 producers" in done.stdout
    # Log lines come back prefixed host/node, and land in the run directory.
    prefixed = [line for line in done.stdout.splitlines() if "/consumer " in line]
    assert prefixed and prefixed[0].split("/")[0] in ssh_hosts.names, done.stdout
    [run_dir] = [p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]
    assert "32 results from 5 producers" in (run_dir / "logs" / "consumer.log").read_text()
    status = json.loads((run_dir / "status.json").read_text())
    assert {n["host"] for n in status["nodes"]} == set(ssh_hosts.names)  # 6 nodes, 3 hosts


def test_placement_honours_labels_and_colocation(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", hosts={"topo-h3": {"labels": ["gpu"]}})
    path = write(
        tmp_path / "placed.yaml",
        f"""
        name: placed
        nodes:
          trainer: {{target: "{NODES}:Where", count: 2, resources: {{host_labels: [gpu]}}}}
          left: {{target: "{NODES}:Where"}}
          right: {{target: "{NODES}:Where"}}
          actor: {{target: "{NODES}:Where", count: 4, colocate: {{per_process: 2}}}}
          spread: {{target: "{NODES}:Where", count: 3}}
        colocation:
          - {{name: pair, nodes: ["@left", "@right"], mode: host}}
        """,
    )
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=60)
    where = {n.id: run.handle(n.id, timeout=20).where() for n in run.program.nodes}
    hostname = {node: w["host"] for node, w in where.items()}
    assert hostname["trainer/0"] == hostname["trainer/1"] == "topo-h3"
    assert hostname["left"] == hostname["right"]
    assert where["left"]["pid"] != where["right"]["pid"]  # two processes on one host
    assert where["actor/0"]["pid"] == where["actor/1"]["pid"]  # threads of one process
    assert where["actor/2"]["pid"] == where["actor/3"]["pid"]
    # Every node registered the address it bound on its own host, reached over CURVE.
    book = run._client.address_book  # the handles' client (made by run.handle)
    addresses = {"topo-h1": "10.213.0.11", "topo-h2": "10.213.0.12", "topo-h3": "10.213.0.13"}
    for node, host in hostname.items():
        assert book.lookup(node).startswith(f"tcp://{addresses[host]}:"), node
    counts = {h: list(hostname.values()).count(h) for h in addresses}
    assert max(counts.values()) - min(counts.values()) <= 3, counts  # spread, not piled up
    assert run.stop(timeout=60) == 0


def test_a_misspelled_argument_is_refused_before_anything_starts(
    ssh_hosts: HostSet, tmp_path: Path
) -> None:
    """``topo run`` binds the nodes' arguments on this machine before it reaches a host."""
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    path = write(
        tmp_path / "typo.yaml",
        """
        name: typo
        nodes:
          producer:
            target: examples.agents.producers:Producer
            args: {producer_idd: 1}
        """,
    )
    done = subprocess.run(
        topo_run_ssh(path, hosts, tmp_path / "runs"), cwd=ROOT, capture_output=True, text=True
    )
    assert done.returncode == 1, done.stdout + done.stderr
    said = "group 'producer': examples.agents.producers:Producer takes no argument 'producer_idd'"
    assert f"{path}:6:12: error: {said}" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()


def test_an_impossible_placement_is_refused_before_anything_starts(
    ssh_hosts: HostSet, tmp_path: Path
) -> None:
    from topo.api import launch

    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    path = write(
        tmp_path / "gpu.yaml",
        f"""
        name: gpu
        nodes:
          trainer: {{target: "{NODES}:Where", resources: {{host_labels: [gpu]}}}}
        """,
    )
    with pytest.raises(TopoError, match="gpu"):
        launch(path, "ssh", backend_options={"hosts": hosts}, log_dir=tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_failing_hosts_are_reported_together_and_nothing_starts(
    ssh_hosts: HostSet, tmp_path: Path
) -> None:
    """h2 has no python at the inventory's path; on h3 the target module is missing
    (it lives in a directory private to each host, filled on h1 and h2 only)."""
    project = ssh_hosts.remote / f"proj-{os.getpid()}"
    here = [ssh_hosts.base / f"h{i}" / "fs" / project.name for i in (1, 2)]
    for directory in [project, *here]:  # the launcher's, and what h1 and h2 see there
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "only_here.py").write_text(
            "class Node:\n    def ping(self):\n        return 1\n"
        )
    try:
        hosts = ssh_hosts.inventory(
            tmp_path / "hosts.yaml", hosts={"topo-h2": {"python": "/nonexistent/bin/python3"}}
        )
        topology = write(
            tmp_path / "t.yaml",
            """
            name: picky
            nodes:
              node: {target: "only_here:Node", count: 3}
            """,
        )
        argv = topo_run_ssh(str(topology), hosts, tmp_path / "runs")
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        done = subprocess.run(
            argv, cwd=project, capture_output=True, text=True, timeout=120, env=env
        )
    finally:
        import shutil

        shutil.rmtree(project, ignore_errors=True)
        for i in (1, 2):
            shutil.rmtree(ssh_hosts.base / f"h{i}" / "fs" / project.name, ignore_errors=True)
    assert done.returncode == 1, done.stdout + done.stderr
    err = done.stderr
    assert (
        "host topo-h2 (10.213.0.12) is not ready: python /nonexistent/bin/python3 is not there"
        in err
    )
    assert "host topo-h3 (10.213.0.13) is not ready: target module only_here does not import" in err
    assert "host topo-h1" not in err
    assert "Traceback" not in err
    assert not (tmp_path / "runs").exists()  # nothing started


def test_ship_copies_the_working_tree_to_hosts_without_it(
    ssh_hosts: HostSet, tmp_path: Path
) -> None:
    """The project (a directory the hosts cannot see) reaches each host's private
    workdir over SFTP; without --ship every host fails its check."""
    project = tmp_path / "project"
    (project / "shipped").mkdir(parents=True)
    (project / "shipped" / "__init__.py").write_text("")
    (project / "shipped" / "nodes.py").write_text(
        textwrap.dedent("""
        import socket
        import topo

        class Report:
            def run(self):
                print("running", __file__, "on", socket.gethostname(), flush=True)
        """)
    )
    write(
        project / "t.yaml",
        """
        name: shipped
        nodes:
          report: {target: "shipped.nodes:Report", count: 3}
        """,
    )
    workdir = str(ssh_hosts.remote / "work")  # private to each host
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", workdir=workdir)
    argv = topo_run_ssh("t.yaml", hosts, tmp_path / "runs")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    # The hosts cannot see tmp_path? They can (shared filesystem): hide it by moving the
    # project where only the launcher's namespace has it.
    hidden = ssh_hosts.remote / f"launcher-{os.getpid()}"
    hidden.parent.mkdir(parents=True, exist_ok=True)
    os.rename(project, hidden)
    try:
        without = subprocess.run(
            argv, cwd=hidden, capture_output=True, text=True, timeout=120, env=env
        )
        shipped = subprocess.run(
            [*argv, "--ship"], cwd=hidden, capture_output=True, text=True, timeout=120, env=env
        )
    finally:
        import shutil

        shutil.rmtree(hidden, ignore_errors=True)
    assert without.returncode == 1, without.stdout + without.stderr
    assert without.stderr.count("target module shipped.nodes does not import") == 3
    assert "--ship" in without.stderr
    assert shipped.returncode == 0, shipped.stdout[-3000:] + shipped.stderr[-3000:]
    lines = [x for x in shipped.stdout.splitlines() if "running" in x]
    assert len(lines) == 3, shipped.stdout
    shipped_file = re.compile(rf"{re.escape(workdir)}/project-[0-9a-f]{{16}}/shipped/nodes\.py")
    assert all(shipped_file.search(x) for x in lines), lines
    assert {x.split()[-1] for x in lines} == {"topo-h1", "topo-h2", "topo-h3"}


def test_a_host_cut_off_counts_as_failed_and_its_nodes_move(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    """``ip link set topo-vN down`` mid-run: after the lease the host is lost, its node
    restarts on a host that is alive, callers meanwhile get an error (not a hang), and
    the cut-off host's agent ends its processes by itself."""
    from topo.runtime.errors import TopoRuntimeError

    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    path = write(
        tmp_path / "cut.yaml",
        f"""
        name: cut
        nodes:
          echo:
            target: "{NODES}:Where"
            count: 3
            restart: {{policy: on-failure, max_restarts: 2, backoff: {{initial_s: 0.1}}}}
        """,
    )
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=60)
    where = run.handle("echo/0", timeout=20).where()
    victim = where["host"]
    ssh_hosts.set_link(victim, False)
    try:
        began = time.monotonic()
        with pytest.raises(TopoRuntimeError):
            run.handle("echo/0", timeout=3).where()
        assert time.monotonic() - began < 10
        moved = wait_until(
            lambda: run.handle("echo/0", timeout=2).where(),
            40,
            what="echo/0 restarted on another host",
            errors=(TopoRuntimeError,),
            every=0.2,
        )
        assert moved["host"] != victim
        assert run.exit_code is None  # the program goes on

        # The cut-off agent ended its processes by itself (its lease ran out).
        def leftover() -> list[int]:
            sshd = ssh_hosts.sshd_pids(victim)
            return [p for p in ssh_hosts.pids(victim) if p not in sshd and _is_topo(p)]

        wait_until(lambda: not leftover(), 10, what="the cut-off host's processes to end")
    finally:
        ssh_hosts.set_link(victim, True)
    assert run.stop(timeout=60) == 0


def test_a_host_cut_off_fails_the_program_when_its_node_may_not_restart(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    path = write(
        tmp_path / "cut.yaml",
        f"""
        name: cut_never
        nodes:
          echo: {{target: "{NODES}:Where", count: 3}}
        """,
    )
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=60)
    victim = run.handle("echo/2", timeout=20).where()["host"]
    ssh_hosts.set_link(victim, False)
    try:
        code = run.wait(30)
    finally:
        ssh_hosts.set_link(victim, True)
    assert code == 1
    assert run.failure is not None
    assert f"was lost with host {victim}: no heartbeat from the host" in run.failure.message


def _is_topo(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return b"topo" in f.read()
    except OSError:
        return False


def test_killing_the_launcher_leaves_nothing_on_any_host(
    ssh_hosts: HostSet, tmp_path: Path
) -> None:
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    path = write(
        tmp_path / "forever.yaml",
        f"""
        name: forever
        nodes:
          echo: {{target: "{NODES}:Where", count: 6}}
        """,
    )
    argv = topo_run_ssh(str(path), hosts, tmp_path / "runs")
    launcher = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert launcher.stdout is not None
        for line in launcher.stdout:
            if "all 6 nodes up" in line:
                break
        else:
            pytest.fail("the program did not come up")
        busy = {h: [p for p in ssh_hosts.pids(h) if _is_topo(p)] for h in ssh_hosts.names}
        assert all(busy.values()), busy  # an agent and nodes on every host
        launcher.kill()
        launcher.wait(10)
        killed = time.monotonic()
        left = wait_no_strays(ssh_hosts, 5)
        assert not left, f"left on the hosts 5 s after kill -9 of the launcher: {left}"
        assert time.monotonic() - killed <= 5.5
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(10)


@pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)
def test_distributed_dqn_runs_across_hosts(ssh_hosts: HostSet, tmp_path: Path) -> None:
    """Acme's distributed DQN on three hosts (a small budget): actors on other hosts
    than the replay insert into it and the learner feeds on it, until the steps
    limiter stops the program."""
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    argv = topo_run_ssh("examples/topologies/acme_distributed.yaml", hosts, tmp_path / "runs")
    for param in ["num_actors=2", "max_actor_steps=1500", "min_replay_size=200", "eval_every_s=5"]:
        argv += ["-p", param]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "final evaluation return:" in done.stdout
    [run_dir] = [p for p in (tmp_path / "runs").iterdir() if not p.is_symlink()]
    status = json.loads((run_dir / "status.json").read_text())
    host_of = {n["id"]: n["host"] for n in status["nodes"]}
    assert len(set(host_of.values())) == 3, host_of
    assert {host_of["actor/0"], host_of["actor/1"]} - {host_of["replay"]}  # across hosts
    assert "learner: stopped after" in (run_dir / "logs" / "learner.log").read_text()
    # Every node stopped within the grace (none killed), with no Reverb error on the way.
    assert not [w for w in status["warnings"] if "grace period" in w], status["warnings"]
    assert "DATA_LOSS" not in done.stdout + done.stderr
