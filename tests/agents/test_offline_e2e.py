"""acme_offline.yaml end to end: the learner records the mixed dataset to its file and
learns from it (filtered BC reaches the good policy's return; CRR runs), and the steps
limiter stops the program by itself."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.agents.learning import OFFLINE, OFFLINE_FINAL, assert_offline_learned
from topo.testing import wait_gone

PATH = Path(__file__).resolve().parents[2] / "examples" / "topologies" / "acme_offline.yaml"
MAX_STEPS = OFFLINE["max_learner_steps"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "learner"),
    [("procs", "filtered_bc"), ("threads", "filtered_bc"), ("threads", "crr")],
)
def test_acme_offline_learns_and_stops_by_itself(
    topo_launch: Callable[..., Any], backend: str, learner: str, tmp_path: Path
) -> None:
    params = {
        **OFFLINE,
        "learner": learner,
        "dataset_path": str(tmp_path / "data" / "episodes.npz"),
        "snapshots": True,
        "snapshot_dir": str(tmp_path / "snapshots"),
    }
    run = topo_launch(PATH, backend=backend, params=params)
    assert run.wait(240) == 0, run.failure
    assert wait_gone(run.pids(), 10) == []
    status = json.loads((run.run_dir / "status.json").read_text())
    assert re.match(r"learner_steps reached \d+, over 1000", status["stop_reason"]), status
    if backend == "procs":  # every node done within the grace period
        # (On threads, a learner's RPC server once took the whole 5 s grace to close under
        # the full suite's load; tracked as a known issue, not asserted here.)
        assert not [w for w in status["warnings"] if "killed" in w]
    evaluator = run.log("evaluator/0")
    if learner == "filtered_bc":  # the good policy in the data plays 500
        assert_offline_learned(evaluator)
    else:
        assert len(OFFLINE_FINAL.findall(evaluator)) == 1, evaluator
    learner = run.log("learner")
    stopped = re.search(r"stopped after (\d+) steps", learner)
    assert stopped and int(stopped[1]) > MAX_STEPS, learner
    assert (tmp_path / "snapshots" / "policy.npz").stat().st_size > 0
    [dataset] = (tmp_path / "data").glob("episodes-*.npz")  # recorded once, by the learner
    assert dataset.stat().st_size > 0
