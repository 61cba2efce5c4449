"""The ``topo_launch`` fixture: programs started in a test are stopped at its end, and
checked gone by pid."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from topo.testing.waiting import wait_gone

if TYPE_CHECKING:
    from topo.api import RunningProgram


@pytest.fixture
def topo_launch(tmp_path: Path) -> Iterator[Callable[..., RunningProgram]]:
    """``topo_launch(program_or_path, backend="threads", **launch_kwargs)`` (``backend``: a
    name or a ``Backend`` object); every program is stopped at teardown and its processes
    are checked gone by pid."""
    from topo.api import launch

    started: list[RunningProgram] = []

    def start(program_or_path: Any, backend: Any = "threads", **kwargs: Any) -> RunningProgram:
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
