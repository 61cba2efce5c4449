"""Targets import from the topology's project wherever topo runs; cachers run for real."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _topo_elsewhere(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`topo ...` from a folder outside the project, with no PYTHONPATH help."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(NO_COLOR="1", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-c", "from topo.cli import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
def test_example_runs_from_another_directory(tmp_path: Path) -> None:
    example = ROOT / "examples/topologies/consumer_producers.yaml"
    done = _topo_elsewhere(
        tmp_path, "run", str(example), "-p", "num_producers=2", "--log-dir", str(tmp_path / "runs")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "results from 2 producers" in done.stdout


def test_missing_target_fails_before_anything_starts(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nnodes:\n  a:\n    target: no_such_pkg_xyz.mod:Thing\n")
    done = _topo_elsewhere(tmp_path, "run", str(path), "--log-dir", str(tmp_path / "runs"))
    assert done.returncode == 1
    # Checked before anything starts, at the target's own line and column.
    assert f"{path}:4:13: error: group 'a': cannot import" in done.stderr
    assert "no module named 'no_such_pkg_xyz.mod'" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "runs").exists()  # nothing was started


def test_executors_read_variables_through_a_cacher(
    topo_launch: Callable, topology: Callable, backend: str
) -> None:
    path = topology("""
        name: cached
        nodes:
          trainer: {target: "bk_nodes:Echo"}
          cache:
            kind: cacher
            source: "@trainer"
            refresh_ms: 60000
          executor:
            target: "bk_nodes:Echo"
            count: 2
            args: {peer: {round_robin: ["@cache"], fallback: ["@trainer"]}}
    """)
    run = topo_launch(path, backend, disable_run=True, ready_timeout=60)
    cache = run.handle("cache")
    assert cache.get_variables(["w"]) == {"version": 1}
    # Served from the cache: the trainer is not asked again.
    assert cache.get_variables(["w"]) == {"version": 1}
    assert run.handle("trainer").get_variables() == {"version": 2}
    assert run.stop(timeout=60) == 0
