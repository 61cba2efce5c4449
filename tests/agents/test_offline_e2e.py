"""acme_offline.yaml end to end: behaviour cloning learns CartPole from the scripted
expert's demonstrations, and the steps limiter stops the program by itself."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from topo.testing import wait_gone

PATH = Path(__file__).resolve().parents[2] / "examples" / "topologies" / "acme_offline.yaml"
MAX_STEPS = 2000
RANDOM_RETURN = 22.0  # a uniformly random CartPole policy


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_acme_offline_learns_and_stops_by_itself(
    topo_launch: Callable[..., Any], backend: str, tmp_path: Path
) -> None:
    params = {
        "max_learner_steps": MAX_STEPS,
        "demo_episodes": 10,
        "eval_every_s": 1.0,
        "snapshots": True,
        "snapshot_dir": str(tmp_path / "snapshots"),
    }
    run = topo_launch(PATH, backend=backend, params=params)
    assert run.wait(90) == 0, run.failure
    assert wait_gone(run.pids(), 10) == []
    status = json.loads((run.run_dir / "status.json").read_text())
    assert re.match(r"learner_steps reached \d+, over 2000", status["stop_reason"]), status
    if backend == "procs":  # every node done within the grace period
        # (On threads, a learner's RPC server once took the whole 5 s grace to close under
        # the full suite's load; tracked as a known issue, not asserted here.)
        assert not [w for w in status["warnings"] if "killed" in w]
    evaluator = run.log("evaluator/0")
    final = re.findall(r"final evaluation at learner_steps \d+: mean return ([\d.]+)", evaluator)
    assert len(final) == 1, evaluator
    assert float(final[0]) > 200.0 > 5 * RANDOM_RETURN, evaluator
    learner = run.log("learner")
    stopped = re.search(r"stopped after (\d+) steps", learner)
    assert stopped and int(stopped[1]) > MAX_STEPS, learner
    assert (tmp_path / "snapshots" / "policy.npz").stat().st_size > 0
