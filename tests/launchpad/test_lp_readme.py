"""The Launchpad example of docs/launchpad.md runs as written: ``python -m
examples.launchpad.consumer_producers --lp_launch_type=...`` ends by itself, exit 0."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from topo.testing import wait_gone

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("launch_type", ["local_mt", "local_mp"])
def test_the_example_runs_from_the_command_line(launch_type: str, tmp_path: Path) -> None:
    page = (ROOT / "docs" / "launchpad.md").read_text(encoding="utf-8")
    assert "python -m examples.launchpad.consumer_producers --lp_launch_type=local_mp" in page
    # from a folder of its own (its runs/ is there: the other launch type's run, on
    # another worker, may end at the same time), importing the examples from the checkout
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "examples.launchpad.consumer_producers",
            f"--lp_launch_type={launch_type}",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("consumer ")]
    assert lines and "8 results from 4 producers" in lines[0], proc.stdout
    assert "stopping: lp.stop() called (consumer)" in proc.stdout
    [run_dir] = (tmp_path / "runs").glob("consumer_producers-*")
    status = json.loads((run_dir / "status.json").read_text())
    assert status["exit_code"] == 0
    assert "8 results from 4 producers" in (run_dir / "logs" / "consumer.log").read_text()
    pids = [n["pid"] for n in status["nodes"] if n.get("pid")]
    assert pids and not wait_gone(pids, 15)  # every node's process (or thread set) ended
