"""Heterogeneous jobs: the script ``topo plan -b slurm`` prints for a program whose groups
differ (features, CPUs per process) is a job of two components; submitted as it is, its
launcher reads every component, starts each node's agent in its component
(``srun --het-group=N``) and runs every executable on a node of the component sized for
it (each reports the node it runs on). The matching of a plan to a job is checked
without Slurm too (``components.by_component``)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends.slurm.cluster import SlurmCluster
from tests.backends.slurm.test_slurm_sbatch import job_env, sbatch
from tests.conftest import CompileText
from topo.backends.slurm.allocation import Allocation, SlurmNode
from topo.backends.slurm.components import by_component
from topo.backends.slurm.options import SlurmOptions
from topo.backends.slurm.partition import parse_cluster
from topo.backends.slurm.request import plan_request

NODES = "tests.backends.slurm.slurm_nodes"
# the learner (3 CPUs) needs feature rack1 (n1), the actors rack2 (n2); the report asks
# for nothing: the plan packs it with the actors (the lighter node), where a placement
# that knew no components would put it beside the learner (fewer executables there)
HET = f"""name: het
nodes:
  learner:
    target: "{NODES}:Where"
    resources: {{cpus: [0, 1, 2], host_labels: [rack1]}}
  actor:
    target: "{NODES}:Where"
    count: 2
    resources: {{host_labels: [rack2]}}
  report:
    target: "{NODES}:Reporter"
    stops_program: true
    args: {{peers: {{learner: "@learner", actor: "@actor"}}}}
"""
PARTITIONS = "PartitionName=main Default=YES MaxTime=UNLIMITED Nodes=n[1-2] State=UP\n"
NODE_LINES = "".join(
    f"NodeName=n{i} CPUTot=4 RealMemory=4000 AvailableFeatures=rack{i} Partitions=main\n"
    for i in (1, 2)
)


def test_a_plan_is_matched_with_a_job_component_by_component(compile_text: CompileText) -> None:
    program = compile_text(HET)
    part = parse_cluster(PARTITIONS, NODE_LINES).partition(None)
    request = plan_request(program, part, SlurmOptions())
    assert request.heterogeneous
    # the job's component 0 on node b, component 1 on node a (Slurm's choice)
    job = Allocation(
        "7", (SlurmNode("b", "10.0.0.2", ("rack1",), 0), SlurmNode("a", "10.0.0.1", ("rack2",), 1))
    )
    assert by_component(request, job) == {
        "learner": "b",
        "actor/0": "a",
        "actor/1": "a",
        "report": "a",
    }
    # a job of another shape (one component, or a node more) gets no assignment
    one = Allocation("8", (SlurmNode("a", "10.0.0.1"), SlurmNode("b", "10.0.0.2")))
    assert by_component(request, one) is None
    more = Allocation("9", (*job.nodes, SlurmNode("c", "10.0.0.3", (), 1)))
    assert by_component(request, more) is None


@pytest.mark.slow
def test_a_heterogeneous_job_runs_each_executable_in_its_component(
    slurm_cluster: SlurmCluster, tmp_path: Path
) -> None:
    topology = tmp_path / "het.yaml"
    topology.write_text(HET)
    planned = subprocess.run(
        [sys.executable, "-m", "topo", "plan", str(topology), "-b", "slurm"],
        env=job_env(slurm_cluster, tmp_path),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert planned.returncode == 0, planned.stderr
    text = planned.stdout[planned.stdout.index("#!") :]  # the script, after its heading
    assert text.count("#SBATCH hetjob") == 1, text
    assert "--constraint=rack1" in text and "--cpus-per-task=3" in text, text
    script = tmp_path / "job.sh"
    script.write_text(text + "\n")
    code, out, err = sbatch(
        slurm_cluster, tmp_path, "--wait", f"--output={tmp_path / 'job.out'}", str(script)
    )
    output = (tmp_path / "job.out").read_text() if (tmp_path / "job.out").exists() else ""
    assert code == 0, f"{out}{err}\n--- job.out\n{output}"
    for line in ("learner on n1", "actor/0 on n2", "actor/1 on n2", "report on n2"):
        assert re.search(rf"/report +\| {line}$", output, re.M), output
    assert "✓ stopped: report finished (stops_program) — exit 0" in output, output
    (run,) = (tmp_path / "runs").glob("het-*")
    agents = sorted(p.name for p in (run / "agents").iterdir())
    assert agents == ["n1.log", "n2.log"]  # an agent in each component
