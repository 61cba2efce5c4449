"""``snapshots:`` as a user meets it: ``topo validate`` and ``topo plan`` show the settings,
``-p`` moves them, and a bad value is a positioned error with exit code 1 from a real
``topo`` process, before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGY = """
name: snap
params:
  snapshot_every: 600
nodes:
  a: {target: "os:getcwd"}
snapshots:
  every_s: ${snapshot_every}
  keep: 2
"""
PLAIN = 'name: plain\nnodes:\n  a: {target: "os:getcwd"}\n'


def test_validate_shows_the_settings(run_topo: Any, write_topo: Any) -> None:
    result = run_topo("validate", write_topo(TOPOLOGY))
    assert result.exit_code == 0, result.output
    assert "snapshots: every 600s, at stop, keep 2, pause timeout 30s\n" in result.stdout
    plain = run_topo("validate", write_topo(PLAIN, name="plain.yaml"))
    assert plain.exit_code == 0 and "snapshots" not in plain.stdout


def test_plan_shows_them_under_the_program_and_p_moves_them(run_topo: Any, write_topo: Any) -> None:
    path = write_topo(TOPOLOGY)
    lines = run_topo("plan", path).stdout.splitlines()
    assert lines[0].startswith("program snap ")
    assert lines[1] == "  snapshots: every 600s, at stop, keep 2, pause timeout 30s"
    moved = run_topo("plan", path, "-p", "snapshot_every=null").stdout.splitlines()
    assert moved[1] == "  snapshots: at stop, keep 2, pause timeout 30s"
    as_json = json.loads(run_topo("plan", path, "--json", "-p", "snapshot_every=30").stdout)
    assert as_json["snapshots"]["every_s"] == 30.0 and as_json["snapshots"]["keep"] == 2
    plain = run_topo("plan", write_topo(PLAIN, name="plain.yaml")).stdout
    assert "snapshots" not in plain


def _topo(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "topo", *map(str, args)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("section", "where", "message"),
    [
        ("snapshots:\n  every_s: 0\n", "5:12", "'snapshots.every_s' must be > 0.0, got 0"),
        ("snapshots:\n  keep: 0\n", "5:9", "'snapshots.keep' must be ≥ 1, got 0"),
        ("snapshots:\n  kept: 3\n", "5:3", "unknown key 'kept' in 'snapshots'"),
        ("snapshots:\n  at_stop: sure\n", "5:12", "'snapshots.at_stop' must be true or false"),
    ],
    ids=["every_s", "keep", "unknown-key", "at_stop"],
)
def test_a_bad_value_exits_1_with_its_position(
    write_topo: Any, section: str, where: str, message: str
) -> None:
    path = write_topo(PLAIN + section)
    for command in ("validate", "plan"):
        done = _topo(command, path)
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stderr.startswith(f"{path}:{where}: error: {message}"), done.stderr
        assert "Traceback" not in done.stdout + done.stderr


def test_run_refuses_a_bad_value_before_starting(write_topo: Any, tmp_path: Path) -> None:
    path = write_topo(PLAIN + "snapshots: {every_s: -1}\n")
    done = _topo("run", "-b", "threads", "--run-dir", tmp_path / "run", path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{path}:4:22: error: 'snapshots.every_s' must be > 0.0" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "run").exists()
