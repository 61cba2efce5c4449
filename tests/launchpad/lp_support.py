"""Helpers of the topo.launchpad tests: stop a launch and check its pids, run scripts."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import topo.launchpad as lp
from topo.testing import wait_gone

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

Launch = Callable[..., lp.Launched]


def stop_and_check(launched: lp.Launched) -> None:
    """Stop a launch and assert that no process it started is left."""
    if launched.run.stop(timeout=60) is None:
        launched.run.kill()
        launched.run.wait(15)
    left = wait_gone(launched.run.pids(), 15)
    assert not left, f"processes left behind by {launched.program.name}: {left}"


def _script_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _write(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    return script


def start_script(tmp_path: Path, body: str, *args: str) -> subprocess.Popen[str]:
    """Start ``body`` (dedented) as a Python script with lp_nodes importable; the process
    (stdout and stderr piped)."""
    return subprocess.Popen(
        [sys.executable, str(_write(tmp_path, body)), *args],
        cwd=tmp_path,
        env=_script_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def run_script(
    tmp_path: Path, body: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``body`` (dedented) as a Python script with lp_nodes importable; its result."""
    return subprocess.run(
        [sys.executable, str(_write(tmp_path, body)), *args],
        cwd=tmp_path,
        env=_script_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
