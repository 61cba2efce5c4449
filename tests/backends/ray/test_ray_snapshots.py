"""Issue 29 on a Ray cluster: snapshots on a clock reach the launcher's run directory
over topo's RPC, consistent; ``topo run --resume`` brings the program back from one."""

from __future__ import annotations

import json
import pickle
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
NODES = "tests.snapshots.snap_nodes"


def test_snapshots_on_ray_resume(ray_cluster: Cluster, tmp_path: Path) -> None:
    path = write(
        tmp_path / "steps.yaml",
        f"""
        name: steps
        snapshots: {{every_s: 1.0, keep: 2}}
        nodes:
          counter: {{target: "topo.nodes:Counter"}}
          stepper:
            count: 2
            target: "{NODES}:Stepper"
            args: {{counter: "@counter"}}
          probe:
            kind: py
            target: "{NODES}:probe"
            args: {{steppers: "@stepper", seconds: 6.0}}
            stops_program: true
        """,
    )
    first = tmp_path / "first"
    argv = topo_run(path, first, address=ray_cluster.address)
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert "RESTORED_FROM [None, None]" in out, out[-3000:]
    snaps = sorted(int(p.name) for p in (first / "snapshots").iterdir() if p.name.isdigit())
    assert len(snaps) == 2 and snaps[-1] >= 2, snaps
    newest = first / "snapshots" / str(snaps[-1])
    manifest = json.loads((newest / "manifest.json").read_text())
    saved = {
        node: pickle.loads((newest / entry["file"]).read_bytes())
        for node, entry in manifest["nodes"].items()
    }
    steps = [saved["stepper/0"]["steps"], saved["stepper/1"]["steps"]]
    assert saved["counter"]["counts"]["steps"] == sum(steps) > 0

    second = tmp_path / "second"
    argv = [
        *topo_run(path, second, address=ray_cluster.address)[:4],
        "--resume",
        str(first),
        "--no-live",
        "--run-dir",
        str(second),
    ]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    restored = re.search(r"RESTORED_FROM \[(\d+), (\d+)\]", out)
    assert restored is not None, out[-3000:]
    assert [int(restored[1]), int(restored[2])] == steps
