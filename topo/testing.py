"""pytest plugin for programs run with ``topo.launch`` (``pytest_plugins = ["topo.testing"]``).

The ``topo_launch`` fixture starts programs (threads backend by default, logs
under the test's ``tmp_path``), stops every one of them at teardown and
checks by pid that no process it started is left behind::

    def test_producer(topo_launch):
        run = topo_launch("examples/topologies/consumer_producers.yaml", disable_run=True)
        assert run.handle("producer/0").work(1) >= 0
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from topo.api import RunningProgram, launch


def alive(pids: Iterable[int]) -> list[int]:
    """The pids that still belong to a live (non-zombie) process."""
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out


def wait_gone(pids: Iterable[int], timeout: float) -> list[int]:
    """Wait until every pid is gone; the ones still alive after ``timeout``."""
    pids = list(pids)
    end = time.monotonic() + timeout
    left = alive(pids)
    while left and time.monotonic() < end:
        time.sleep(0.05)
        left = alive(left)
    return left


@pytest.fixture
def topo_launch(tmp_path: Path) -> Iterator[Callable[..., RunningProgram]]:
    """``topo_launch(program_or_path, backend="threads", **launch_kwargs)`` (``backend``: a
    name or a ``Backend`` object); every program is stopped at teardown and its processes
    are checked gone by pid."""
    started: list[RunningProgram] = []

    def start(program_or_path: Any, backend: str = "threads", **kwargs: Any) -> RunningProgram:
        kwargs.setdefault("log_dir", tmp_path / "runs")
        run = launch(program_or_path, backend=backend, **kwargs)
        started.append(run)
        return run

    yield start
    for run in started:
        if run.stop(timeout=60) is None:
            run.kill()
            run.wait(15)
        left = wait_gone(run.pids(), 15)
        assert not left, f"processes left behind by {run.program.name}: {left}"
