"""``topo apply`` holds back a change that would stop the program or lose work until it
is confirmed: a steps limiter added with a limit its counter already passed (the issue's
``max_actor_steps`` run), a group of nodes that keep a state removed whole (a group
scaled down is not asked about). Without ``--yes`` (or a y at
the prompt on a terminal) it is refused with exit 1 and says how to confirm;
``--dry-run`` only shows it."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.operate import env, run_detached, run_pids, status, topo
from topo.testing import wait_gone, wait_until

LIMITED = """\
name: limited
params:
  max_steps: {default: 50, type: int}
  steppers: {default: 1}
nodes:
  counter: {target: "topo.nodes:Counter"}
  limiter:
    target: "topo.nodes:StepsLimiter"
    enabled: ${max_steps is not None}
    stops_program: true
    args: {counter: "@counter", max_steps: "${max_steps}", poll_s: 0.1}
  stepper:
    target: tests.snapshots.snap_nodes:Stepper
    count: ${steppers}
    args: {counter: "@counter", key: actor_steps, sleep_s: 0.01}
"""
STOPS = "limiter would stop the program at once: actor_steps is "


def _on_a_terminal(cwd: Path, answer: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``topo apply ARGS`` with a terminal as its stdin, typed ``answer`` at its prompt."""
    master, slave = pty.openpty()
    try:
        os.write(master, answer.encode())  # waits in the terminal until the prompt reads it
        return subprocess.run(
            [sys.executable, "-m", "topo", "apply", *args],
            stdin=slave,
            cwd=cwd,
            env=env(cwd),
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(slave)
        os.close(master)


@pytest.mark.slow
def test_a_change_that_stops_the_program_or_loses_state_needs_a_yes(tmp_path: Path) -> None:
    file = tmp_path / "limited.yaml"
    file.write_text(LIMITED)
    args = ["-b", "procs", "-p", "max_steps=null", "-p", "steppers=2"]
    run_id, run_dir = run_detached(tmp_path, str(file), *args)
    pids = run_pids(run_dir)
    try:
        # the run's max_steps=null is carried: the limiter is not added back
        same = topo("apply", run_id, str(file), cwd=tmp_path)
        assert same.returncode == 0 and "No differences." in same.stdout, same.stderr

        dry = ["apply", run_id, str(file), "-p", "max_steps=5", "--dry-run"]
        shown = topo(*dry, cwd=tmp_path)
        while STOPS not in shown.stderr:  # until the steppers passed 5 steps
            assert shown.returncode == 0 and status(run_dir)["state"] == "running", shown.stderr
            shown = topo(*dry, cwd=tmp_path)
        assert shown.returncode == 0 and "+ limiter" in shown.stdout
        assert "dry run: nothing changed" in shown.stderr
        stop = topo("apply", run_id, str(file), "-p", "max_steps=5", cwd=tmp_path)
        assert stop.returncode == 1 and STOPS in stop.stderr, stop.stderr
        assert "over its max_steps of 5" in stop.stderr and "--yes" in stop.stderr
        assert "Traceback" not in stop.stderr

        fewer = topo("apply", run_id, str(file), "-p", "steppers=1", cwd=tmp_path)
        assert fewer.returncode == 0, fewer.stdout + fewer.stderr  # scaled down: not asked
        assert "change 1 applied" in fewer.stderr and "✓ stopped stepper/1" in fewer.stderr

        lose = ["apply", run_id, str(file), "-p", "steppers=0"]
        refused = topo(*lose, cwd=tmp_path)
        assert refused.returncode == 1, refused.stdout + refused.stderr
        said = "stepper/0 keeps a state (save/restore) and would be removed with its group"
        assert said in refused.stderr
        said_no = _on_a_terminal(tmp_path, "n\n", *lose[1:])
        assert said_no.returncode == 1 and "[y/N]" in said_no.stdout, said_no.stderr
        assert status(run_dir)["generation"] == 1
        assert len(status(run_dir)["nodes"]) == 2  # nothing changed
        said_yes = _on_a_terminal(tmp_path, "y\n", *lose[1:])
        assert said_yes.returncode == 0, said_yes.stdout + said_yes.stderr
        assert "change 2 applied" in said_yes.stderr and "✓ stopped stepper/0" in said_yes.stderr
        assert [n["id"] for n in status(run_dir)["nodes"]] == ["counter"]

        ended = topo("apply", run_id, str(file), "-p", "max_steps=5", "--yes", cwd=tmp_path)
        assert STOPS in ended.stderr  # said, and done: the program stops itself
        wait_until(lambda: status(run_dir)["state"] == "ended", 60, what="the run to end")
        assert "actor_steps reached" in status(run_dir)["stop_reason"]
    finally:
        topo("stop", run_id, cwd=tmp_path)
    assert not wait_gone(pids, 30)
