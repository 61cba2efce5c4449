"""End to end: an ``sbatch`` script that runs ``topo run FILE -b slurm`` in its job, as a
user of the cluster writes it by hand. An example topology runs to its end (the job
exits 0, its output in the job's output file); a running one is operated from outside
the job (``topo status``, ``topo snapshot``: the launcher's control channel on TCP), and
``scancel`` leaves no process of the job (launcher, its sruns, agents, fork servers,
nodes: checked by pid)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends.slurm.cluster import SlurmCluster
from topo.testing import wait_gone, wait_until

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "topologies" / "consumer_producers.yaml"
NODES = "tests.backends.slurm.slurm_nodes"
FOREVER = f"""name: forever
nodes:
  where: {{target: "{NODES}:Where", count: 2, resources: {{spread: true}}}}
  ticker: {{target: "topo.testing.nodes:Ticker", args: {{name: t, every: 0.2}}}}
"""


def script(tmp_path: Path, topology: Path) -> Path:
    """The job script: two nodes, its output in ``job.out``, the launcher exec'd."""
    path = tmp_path / "job.sh"
    path.write_text(
        "#!/bin/bash\n"
        "#SBATCH --job-name=topo-e2e\n"
        "#SBATCH --nodes=2\n"
        f"#SBATCH --output={tmp_path / 'job.out'}\n"
        f"exec {sys.executable} -m topo run {topology} -b slurm --no-live "
        f"--run-dir {tmp_path / 'run'}\n"
    )
    return path


def job_env(slurm: SlurmCluster, tmp_path: Path) -> dict[str, str]:
    """What the job inherits from the submitting shell (sbatch exports it all)."""
    return {
        **slurm.env(),
        "PYTHONPATH": str(ROOT),
        "TOPO_HOME": str(tmp_path / ".topo-home"),
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }


def sbatch(slurm: SlurmCluster, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """``sbatch ARGS`` from ``tmp_path`` (exit status, stdout, stderr)."""
    done = subprocess.run(
        ["sbatch", f"--chdir={tmp_path}", *args],
        env=job_env(slurm, tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.returncode, done.stdout, done.stderr


def test_an_sbatch_script_runs_an_example_to_its_end(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    code, out, err = sbatch(slurm_cluster, tmp_path, "--wait", str(script(tmp_path, EXAMPLE)))
    output = (tmp_path / "job.out").read_text() if (tmp_path / "job.out").exists() else ""
    assert code == 0, f"{out}{err}\n--- job.out\n{output}"
    assert "consumer: 32 results from 4 producers" in output, output
    assert "✓ stopped: consumer finished (stops_program) — exit 0" in output, output
    agents = sorted(p.name for p in (tmp_path / "run" / "agents").iterdir())
    assert agents == ["n1.log", "n2.log"]  # one agent on each node of the job


def topo_outside(
    slurm: SlurmCluster, tmp_path: Path, *args: str
) -> subprocess.CompletedProcess[str]:
    """``topo ARGS`` from a shell outside the job (a login node's)."""
    return subprocess.run(
        [sys.executable, "-m", "topo", *args],
        env=job_env(slurm, tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_job_operated_from_outside_and_cancelled_leaves_no_process(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    topology = tmp_path / "forever.yaml"
    topology.write_text(FOREVER)
    code, out, err = sbatch(slurm_cluster, tmp_path, "--parsable", str(script(tmp_path, topology)))
    assert code == 0, out + err
    job = out.strip().split(";")[0]
    record = tmp_path / "run" / "status.json"

    def up() -> dict[str, object] | None:
        try:
            data: dict[str, object] = json.loads(record.read_text())
        except (OSError, ValueError):
            return None
        nodes = data.get("nodes") or []
        return data if len(nodes) == 3 and all(n.get("pid") for n in nodes) else None  # type: ignore[union-attr]

    try:
        status = wait_until(up, 120, what="every node of the run up")
        stepds = [s for s in slurm_cluster.stepds() if f"[{job}." in " ".join(s.cmdline())]
        assert len(stepds) == 3  # the batch step and one agent's step per node
        pids = {s.pid for s in stepds}
        for stepd in stepds:
            pids |= {c.pid for c in stepd.children(recursive=True)}
        launcher = int(status["launcher"]["pid"])  # type: ignore[index]
        nodes = {int(n["pid"]) for n in status["nodes"]}  # type: ignore[attr-defined]
        assert launcher in pids and nodes <= pids and os.getpid() not in pids

        run_dir = str(tmp_path / "run")
        assert str(status["control"]).startswith("tcp://"), status["control"]
        shown = topo_outside(slurm_cluster, tmp_path, "status", run_dir)
        assert shown.returncode == 0, shown.stderr
        assert re.search(r"where/1 .* running", shown.stdout), shown.stdout
        taken = topo_outside(slurm_cluster, tmp_path, "snapshot", run_dir)
        assert taken.returncode == 0, taken.stderr
        assert taken.stdout.strip() == str(tmp_path / "run" / "snapshots" / "1"), taken
    finally:
        slurm_cluster.run("scancel", job)
    assert wait_gone(pids, 90) == [], "processes of the job left after scancel"
    wait_until(lambda: not slurm_cluster.jobs(), 90, what="the job to end")
