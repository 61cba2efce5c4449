"""topo.launchpad tests: Launchpad programs launched on threads (``test_mt``) and
processes (``test_mp``); every launch is stopped at teardown and checked gone by pid."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import topo.launchpad as lp
from topo.testing import wait_gone

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(HERE) not in sys.path:  # lp_nodes must import in the launcher and in the fork server
    sys.path.insert(0, str(HERE))

Launch = Callable[..., lp.Launched]


@pytest.fixture(params=["test_mt", "test_mp"])
def launch_type(request: pytest.FixtureRequest) -> str:
    """Both test launch types: threads and processes."""
    return str(request.param)


def stop_and_check(launched: lp.Launched) -> None:
    """Stop a launch and assert that no process it started is left."""
    if launched.run.stop(timeout=60) is None:
        launched.run.kill()
        launched.run.wait(15)
    left = wait_gone(launched.run.pids(), 15)
    assert not left, f"processes left behind by {launched.program.name}: {left}"


@pytest.fixture
def lp_launch(tmp_path: Path, launch_type: str) -> Iterator[Launch]:
    """``lp_launch(program, **kwargs)``: ``lp.launch`` with this test's launch type and
    logs under tmp_path; stopped at teardown, its pids checked gone."""
    started: list[lp.Launched] = []

    def start(program: lp.Program, **kwargs: Any) -> lp.Launched:
        kwargs.setdefault("launch_type", launch_type)
        kwargs.setdefault("log_dir", str(tmp_path / "runs"))
        launched = lp.launch(program, **kwargs)
        started.append(launched)
        return launched

    yield start
    for launched in started:
        stop_and_check(launched)


def start_script(tmp_path: Path, body: str, *args: str) -> subprocess.Popen[str]:
    """Start ``body`` (dedented) as a Python script with lp_nodes importable; the process
    (stdout and stderr piped)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.Popen(
        [sys.executable, str(script), *args],
        cwd=tmp_path,
        env=_script_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _script_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT), env.get("PYTHONPATH", "")])
    return env


def run_script(
    tmp_path: Path, body: str, *args: str, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """Run ``body`` (dedented) as a Python script with lp_nodes importable; its result."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script), *args],
        cwd=tmp_path,
        env=_script_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
