"""Conformance: a run started with ``topo run -d`` goes on after the command returned
and is operated from other shells: ``ps`` and ``status`` see it running, its output
goes on into its run directory, ``snapshot`` saves it, ``stop`` ends it leaving
nothing, and ``topo run --resume`` brings it back from its snapshot (``logs``, ``attach``
and the rest read the run directory alike for every backend: tests/cli)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from topo.rundir.layout import SNAPSHOTS_DIR
from topo.testing.suite.harness import NODES, Harness, log_of, status
from topo.testing.waiting import wait_until

OPERATED = f"""
name: operated
nodes:
  counter: {{target: "topo.nodes:Counter"}}
  stepper: {{target: "{NODES}:Stepper", count: 2, args: {{counter: "@counter"}}}}
  ticker: {{target: "{NODES}:Ticker", args: {{name: t, every: 0.1}}}}
"""


class Detached:
    """``topo run -d``, then ps / status / snapshot / stop / --resume."""

    @pytest.mark.slow
    def test_a_detached_run_is_operated_from_other_shells(self, suite: Harness) -> None:
        name = suite.ut.name
        run_id, run_dir = suite.detached(*suite.run_args(suite.write(OPERATED)))
        runs, finished = [run_id], False
        try:
            launchers, nodes = _pids(run_dir)
            listed = suite.topo("ps").stdout
            running = rf"{run_id}\s+operated\s+{re.escape(name)}\s+running\s+4/4"
            assert re.search(running, listed), listed
            shown = suite.topo("status", run_id[:6])  # a unique prefix names the run
            assert shown.returncode == 0, shown.stderr
            assert re.search(r"stepper/1 .* running", shown.stdout), shown.stdout
            wait_until(lambda: "t tick 3" in log_of(run_dir, "ticker"), 60, what="its output")

            taken = suite.topo("snapshot", run_id)
            assert taken.returncode == 0, taken.stderr
            assert re.search(r"snapshot 1 of run \S+: 3 node state\(s\)", taken.stderr), taken
            assert taken.stdout.strip() == str(run_dir / SNAPSHOTS_DIR / "1")

            stopped = suite.topo("stop", run_id)
            assert stopped.returncode == 0, stopped.stderr
            record = status(run_dir)
            assert record["state"] == "ended" and record["exit_code"] == 0, record
            suite.assert_nothing_left(pids=nodes, local=launchers)

            again_id, again = suite.detached("run", "--resume", run_id)
            runs.append(again_id)
            launchers, nodes = _pids(again)
            assert status(again)["backend"] == name  # as the resumed run was started
            wait_until(lambda: "restored at step" in log_of(again, "stepper/1"), 60, what="it")
            assert suite.topo("stop", again_id).returncode == 0
            suite.assert_nothing_left(pids=nodes, local=launchers)
            finished = True
        finally:  # a test that failed half-way leaves no run going
            for run in runs if not finished else []:
                suite.topo("stop", "--kill", run)


def _pids(run_dir: Path) -> tuple[set[int], set[int]]:
    """The run's launcher (this machine's) and its node pids, as its record says."""
    record = status(run_dir)
    nodes = {int(n["pid"]) for n in record["nodes"] if n["pid"]}
    return {int(record["launcher"]["pid"])}, nodes
