"""A run starts from the snapshot that was checked when it was asked for (issue 41): the
manifest is read once, when the run request is made, and never again at the start."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo.api import RunningProgram, prepare, start
from topo.rundir.layout import MANIFEST_FILE as MANIFEST
from topo.rundir.snapshots import Snapshot, SnapshotError, read_snapshot
from topo.testing import wait_gone, wait_until

STEPPERS = """
    name: snap
    nodes:
      counter:
        target: "topo.nodes:Counter"
      stepper:
        count: 2
        target: "snap_nodes:Stepper"
        args: {counter: "@counter"}
"""


def _snapshot(topo_launch: Callable[..., RunningProgram], path: Path) -> tuple[Snapshot, int]:
    """A snapshot of a run of ``path`` that stepped a while, and stepper/0's saved steps."""
    first = topo_launch(path, "threads", ready_timeout=60)
    stepper = first.handle("stepper/0", timeout=30)
    wait_until(lambda: stepper.status()["steps"] > 30, 60, what="the stepper's steps")
    snap = first.snapshot()
    assert first.stop(timeout=60) == 0
    steps = pickle.loads(snap.state("stepper/0") or b"")["steps"]
    return snap, int(steps)


def _restored(run: RunningProgram) -> Any:
    try:
        return run.handle("stepper/0", timeout=30).status()["restored_from"]
    finally:
        pids = run.pids()
        assert run.stop(timeout=60) == 0
        assert not wait_gone(pids, 15)


def test_the_manifest_gone_after_the_check_does_not_stop_the_start(
    topo_launch: Callable[..., RunningProgram], topology: Callable[[str], Path], tmp_path: Path
) -> None:
    path = topology(STEPPERS)
    snap, steps = _snapshot(topo_launch, path)
    launcher = prepare(path, "threads", start_from=snap.path, log_dir=tmp_path / "again")
    (snap.path / MANIFEST).unlink()  # between the check and the start
    run = start(launcher, ready_timeout=60)
    assert _restored(run) == steps


def test_a_snapshot_given_read_is_not_read_again(
    topo_launch: Callable[..., RunningProgram], topology: Callable[[str], Path], tmp_path: Path
) -> None:
    """``topo run --resume/--fork`` finds the snapshot (its manifest read) and hands that
    ``Snapshot`` over: the run is checked against it and starts from it as it was read."""
    path = topology(STEPPERS)
    snap, steps = _snapshot(topo_launch, path)
    found = read_snapshot(snap.path)
    (snap.path / MANIFEST).unlink()
    with pytest.raises(SnapshotError, match=r"no manifest\.json"):  # by path: read, so missed
        prepare(path, "threads", start_from=snap.path, log_dir=tmp_path / "by-path")
    launcher = prepare(path, "threads", start_from=found, log_dir=tmp_path / "given")
    run = start(launcher, ready_timeout=60)
    assert _restored(run) == steps
