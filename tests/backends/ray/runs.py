"""Helpers of the ray backend's tests: ``topo run -b ray`` in a subprocess, and what its
nodes (``ray_nodes.Reporter``) and run directory say."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo.rundir.layout import log_path
from topo.testing import wait_until

ROOT = Path(__file__).resolve().parents[3]
NODES = "tests.backends.ray.ray_nodes"


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text))
    return path


def topo_run(file: Path | str, run_dir: Path, *extra: str, address: str | None = None) -> list[str]:
    """The command line of ``topo run FILE -b ray`` (on the cluster at ``address``, else
    on a local Ray the run starts)."""
    where = ["--address", address] if address else []
    return [
        *[sys.executable, "-m", "topo", "run", str(file), "-b", "ray", *where],
        *["--no-live", "--run-dir", str(run_dir), *extra],
    ]


def start(argv: list[str], cwd: Path = ROOT) -> subprocess.Popen[str]:
    """``argv`` in the background, its stdout and stderr together in a pipe."""
    return subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def wheres(run_dir: Path, node: str) -> list[dict]:
    """What node ``node`` printed about itself (``Reporter``), one entry per attempt."""
    log = log_path(run_dir, node)
    lines = log.read_text().splitlines() if log.exists() else []
    return [json.loads(line.split("WHERE ", 1)[1]) for line in lines if "WHERE " in line]


def status(run_dir: Path) -> dict[str, dict]:
    """Node id -> its entry in the run's status.json ({} before it is written)."""
    try:
        data = json.loads((run_dir / "status.json").read_text())
    except (OSError, ValueError):
        return {}
    return {n["id"]: n for n in data["nodes"]}


def wait_for(what: Callable[[], Any], proc: subprocess.Popen, timeout: float = 90) -> Any:
    """``what()`` once it is true; fails if the run ends or ``timeout`` passes first."""

    def found() -> Any:
        if (value := what()) or proc.poll() is None:
            return value
        out = proc.stdout.read() if proc.stdout else ""
        pytest.fail(f"the run ended early ({proc.returncode}):\n{out[-3000:]}")

    return wait_until(found, timeout, every=0.2)


def kill_if_running(proc: subprocess.Popen) -> None:
    """For a test's ``finally``: a run the test did not see to its end is killed."""
    if proc.poll() is None:
        proc.kill()
        proc.wait(10)
