"""Issue 29 from a user's shells: ``topo snapshot`` a detached run, list its snapshots,
stop it, ``topo run --resume`` it; bad --resume input says what is wrong and starts
nothing."""

from __future__ import annotations

import os
import re
import shutil
import signal
from pathlib import Path

import pytest

from tests.cli.operate import run_detached, run_pids, status, topo
from topo.testing import wait_gone, wait_until

HERE = Path(__file__).resolve().parent
TOPOLOGY = """\
name: snapcli
nodes:
  counter:
    target: "topo.nodes:Counter"
  stepper:
    count: 2
    target: "snap_nodes:Stepper"
    args: {counter: "@counter"}
"""


def _project(tmp_path: Path) -> Path:
    shutil.copy(HERE / "snap_nodes.py", tmp_path / "snap_nodes.py")
    path = tmp_path / "steps.yaml"
    path.write_text(TOPOLOGY)
    return path


def _kill(pids: set[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.slow
def test_snapshot_a_detached_run_then_resume_it(tmp_path: Path) -> None:
    file = _project(tmp_path)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    try:
        taken = topo("snapshot", run_id, cwd=tmp_path)
        assert taken.returncode == 0, taken.stderr
        assert re.search(r"◆ snapshot 1 of run \S+: 3 node state\(s\), .* paused", taken.stderr)
        assert Path(taken.stdout.strip()) == run_dir / "snapshots" / "1"
        assert topo("snapshot", cwd=tmp_path).returncode == 0  # the latest run, again
        listed = topo("snapshot", "--list", run_id, cwd=tmp_path)
        assert re.search(r"^\s+1 .* 3 .* topo snapshot$", listed.stdout, re.M), listed.stdout
        assert re.search(r"^\s+2 ", listed.stdout, re.M)
        assert topo("stop", run_id, cwd=tmp_path).returncode == 0
        assert not wait_gone(pids, 20)

        not_live = topo("snapshot", run_id, cwd=tmp_path)
        assert not_live.returncode == 1 and "is not running" in not_live.stderr
        _refusals(tmp_path, file, run_id, run_dir)
        # RUN as every command takes it: an id prefix names the run to resume
        _, again = run_detached(tmp_path, "--resume", run_id[:6], "--snapshot", "1")
        pids |= run_pids(again)
        assert status(again)["backend"] == "procs"  # as the resumed run was started
        wait_until(
            lambda: "restored its state" in _log(again, "stepper/1"),
            60,
            what="stepper/1 to say it restored its state",
        )
        assert topo("stop", cwd=tmp_path).returncode == 0
        assert not wait_gone(pids, 20)
    finally:
        _kill(pids)


def _refusals(tmp_path: Path, file: Path, run_id: str, run_dir: Path) -> None:
    """What a wrong --resume or --fork says, and that it starts nothing."""
    runs = sorted((tmp_path / "runs").iterdir())
    with_file = topo("run", str(file), "--resume", run_id, cwd=tmp_path)
    assert with_file.returncode == 2, with_file.stderr  # a command-line mistake
    assert "--resume RUN brings back the program RUN ran" in with_file.stderr
    assert "use --fork RUN" in with_file.stderr and "--from" not in with_file.stderr
    nope = topo("run", "--resume", "runs/nope", cwd=tmp_path)
    assert nope.returncode == 1 and "no run 'runs/nope'" in nope.stderr, nope.stderr
    assert "snapshot" not in nope.stderr
    other = tmp_path / "other.yaml"
    other.write_text(TOPOLOGY.replace("snapcli", "other").replace("stepper:", "walker:"))
    forked = topo("run", str(other), "--fork", run_id, "-q", cwd=tmp_path)
    assert forked.returncode == 1, forked.stderr
    assert re.search(
        rf"snapshot 2 of run {re.escape(str(run_dir))} belongs to program 'snapcli' "
        r"\(structure [0-9a-f]{12}\), not to program 'other' \(structure [0-9a-f]{12}\): "
        r"2 saved states have no node in it: 'stepper/0', 'stepper/1'",
        " ".join(forked.stderr.split()),
    ), forked.stderr
    assert sorted((tmp_path / "runs").iterdir()) == runs  # nothing started


def _log(run_dir: Path, node: str) -> str:
    path = run_dir / "logs" / f"{node.replace('/', '_')}.log"
    return path.read_text(errors="replace") if path.is_file() else ""


def test_resume_of_a_run_without_snapshots_or_a_changed_program_starts_nothing(
    tmp_path: Path,
) -> None:
    file = _project(tmp_path)
    empty = tmp_path / "nothing"
    empty.mkdir()
    none = topo("run", "--resume", str(empty), cwd=tmp_path)
    assert none.returncode == 1 and "has no snapshot" in none.stderr
    assert "Traceback" not in none.stderr
    both = topo("run", str(file), "--resume", str(empty), "--fork", str(empty), cwd=tmp_path)
    assert both.returncode == 2 and "not several" in both.stderr  # the command line's mistake
    lone = topo("run", str(file), "--snapshot", "2", cwd=tmp_path)
    assert lone.returncode == 2 and "--snapshot N goes with --resume" in lone.stderr
    assert not (tmp_path / "runs").exists()
