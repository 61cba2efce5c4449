"""``topo run -b NAME``: plugin backends through entry points, planned names, refusals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TOPO = [sys.executable, "-c", "from topo.cli import main; main()"]
HELLO = "name: hello\nnodes:\n  hi: {kind: py, target: 'bk_nodes:hello'}\n"


def _topo(*args: str, extra_path: Path | None = None) -> subprocess.CompletedProcess[str]:
    paths = [str(ROOT), str(HERE), *([str(extra_path)] if extra_path else [])]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(paths), NO_COLOR="1", COLUMNS="200")
    return subprocess.run(
        [*TOPO, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
    )


def _install_plugin(site: Path) -> None:
    """A distribution installed the way pip leaves one: a module plus a dist-info whose
    entry_points.txt registers it in the ``topo.backends`` group."""
    site.mkdir()
    (site / "topo_plugin_xyz.py").write_text(
        textwrap.dedent("""
        from topo.backends.threads import ThreadsBackend

        class PluggedBackend(ThreadsBackend):
            name = "plugged"
    """)
    )
    info = site / "topo_plugin_xyz-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: topo-plugin-xyz\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[topo.backends]\nplugged = topo_plugin_xyz:PluggedBackend\n"
    )


@pytest.mark.slow
def test_a_backend_registered_by_entry_point_runs_a_topology(tmp_path: Path) -> None:
    site = tmp_path / "site"
    _install_plugin(site)
    path = tmp_path / "hello.yaml"
    path.write_text(HELLO)
    run_dir = tmp_path / "run"
    done = _topo(
        "run", str(path), "-b", "plugged", "--run-dir", str(run_dir), "-q", extra_path=site
    )
    assert done.returncode == 0, done.stderr
    status = json.loads((run_dir / "status.json").read_text())
    assert status["backend"] == "plugged"
    assert "hello from hi" in (run_dir / "logs" / "hi.log").read_text()
    listed = subprocess.run(
        [
            sys.executable,
            "-c",
            "from topo.backends.base import available_backends as a; print(a())",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(site)])),
    )
    assert "'plugged'" in listed.stdout


def test_an_unknown_backend_is_refused_naming_the_available_ones(tmp_path: Path) -> None:
    path = tmp_path / "hello.yaml"
    path.write_text(HELLO)
    done = _topo("run", str(path), "-b", "nope", "--log-dir", str(tmp_path / "runs"))
    assert done.returncode == 2  # a bad option value
    assert "unknown backend 'nope'; available: procs, ray, slurm, ssh, threads" in done.stderr
    assert not (tmp_path / "runs").exists()
    done = _topo("run", str(path), "-b", "procs", "--address", "auto")
    assert done.returncode == 2
    assert "--address only applies to --backend ray (not procs)" in done.stderr


def test_threads_refusal_is_printed_as_a_diagnostic(tmp_path: Path) -> None:
    path = tmp_path / "pinned.yaml"
    path.write_text(
        "name: pinned\nnodes:\n  echo:\n    target: 'bk_nodes:Echo'\n    resources: {gpus: [0]}\n"
    )
    done = _topo("run", str(path), "-b", "threads", "--log-dir", str(tmp_path / "runs"))
    assert done.returncode == 1
    assert f"{path}:3:" in done.stderr
    assert "threads backend cannot honour" in done.stderr and "gpus" in done.stderr
    assert "--backend procs" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "runs").exists()
