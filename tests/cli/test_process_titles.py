"""Each process of a run names itself in ``ps`` and ``top``: the launcher, the fork server
and every node's process (colocated nodes in short), read from the real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from topo.backends.titles import node_title, nodes_name
from topo.testing import Lines, wait_gone

ROOT = Path(__file__).resolve().parents[2]
NODES = ROOT / "tests" / "backends"  # bk_nodes
RUN = [sys.executable, "-m", "topo", "run", "--no-live"]
TITLED = """\
name: titled
nodes:
  echo: {target: "bk_nodes:Echo", count: 2}
  pack: {target: "bk_nodes:Echo", count: 3, colocate: {per_process: 3}}
  learner: {target: "bk_nodes:Echo"}
  replay: {target: "bk_nodes:Echo"}
colocation:
  - {name: lr, nodes: ["@learner", "@replay"]}
"""


def title(pid: int) -> str:
    """What ``ps`` shows for ``pid`` (its /proc cmdline, NULs and padding dropped)."""
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read().replace(b"\0", b" ").decode().strip()


def test_colocated_nodes_are_named_in_short() -> None:
    assert nodes_name(["actor/3"]) == "actor/3"
    assert nodes_name(["actor/0", "actor/1", "actor/2", "actor/5"]) == "actor/0-2,5"
    assert nodes_name(["learner", "replay/0", "replay/1"]) == "learner+replay/0-1"
    assert node_title("acme_distributed", ["actor/3"]) == "topo: acme_distributed/actor/3"


def _start(topology: Path, log_dir: Path, backend: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(NODES)]), NO_COLOR="1")
    return subprocess.Popen(
        [*RUN, str(topology), "-b", backend, "--grace", "2", "--log-dir", str(log_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        cwd=ROOT,
    )


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_every_process_of_a_run_is_titled(tmp_path: Path, backend: str) -> None:
    topology = tmp_path / "titled.yaml"
    topology.write_text(TITLED)
    proc = _start(topology, tmp_path / "runs", backend)
    kids: list[int] = []
    try:
        assert proc.stdout is not None
        said = Lines(proc.stdout)
        said.wait_for("nodes up in", 60)
        assert title(proc.pid) == f"topo: run titled ({backend})"
        ps = subprocess.run(
            ["ps", "-o", "args=", "-p", str(proc.pid)], capture_output=True, text=True
        )
        assert ps.stdout.strip() == f"topo: run titled ({backend})"
        kids = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
        titles = sorted(title(pid) for pid in kids)
        if backend == "procs":
            assert titles == [
                "topo: titled fork server",
                "topo: titled/echo/0",
                "topo: titled/echo/1",
                "topo: titled/learner+replay",
                "topo: titled/pack/0-2",
            ]
        else:  # nodes are threads of the launcher; its one child is the guard
            assert len(titles) == 1 and "topo/backends/guard.py" in titles[0], titles
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 130, said.text()
        assert not wait_gone(kids, 15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
