"""topo.launchpad tests: Launchpad programs launched on threads (``test_mt``) and
processes (``test_mp``); every launch is stopped at teardown and checked gone by pid."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # lp_nodes must import in the launcher and in the fork server
    sys.path.insert(0, str(HERE))

from lp_support import Launch, stop_and_check  # noqa: E402

import topo.launchpad as lp  # noqa: E402


@pytest.fixture(params=["test_mt", "test_mp"])
def launch_type(request: pytest.FixtureRequest) -> str:
    """Both test launch types: threads and processes."""
    return str(request.param)


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
