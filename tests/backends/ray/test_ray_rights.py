"""Least privilege on a Ray cluster: a node reaches only the nodes it was wired to and
those whose handles it was passed in a call."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.backends.ray.cluster import Cluster, ray_missing
from tests.backends.ray.runs import ROOT, topo_run, write

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]
NODES = "tests.backends.rights_nodes"


def test_an_unwired_call_on_ray_is_refused(ray_cluster: Cluster, tmp_path: Path) -> None:
    path = write(
        tmp_path / "rights.yaml",
        f"""
        name: rights
        nodes:
          learner: {{target: "{NODES}:Learner"}}
          broker: {{target: "{NODES}:Broker", args: {{learner: "@learner", rogue: "@rogue"}}}}
          rogue: {{target: "{NODES}:Rogue"}}
          probe:
            kind: py
            target: "{NODES}:probe"
            args: {{rogue: "@rogue", broker: "@broker"}}
            stops_program: true
        """,
    )
    argv = topo_run(path, tmp_path / "run", address=ray_cluster.address)
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "alone: denied: node 'learner' refused a call from 'rogue'" in out, out[-3000:]
    took = re.search(r"alone: denied: .*\((\d+\.\d+)s\)", out)
    assert took is not None and float(took.group(1)) < 5, out[-3000:]
    assert "handed: restored" in out, out[-3000:]
