"""mava_dial.yaml end to end with a tiny budget: it stops by itself, the trainer learns
from fresh batches (the Reverb queue hands every played episode to the trainer once),
and the greedy policy already does better than telling at random.

Reaching the optimum takes about 40,000 episodes: ``bench/dial_bench.py`` measures it."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest

from topo.api import RunningProgram

PATH = "examples/topologies/mava_dial.yaml"
STEPS = 20_000


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "caches"), [("procs", 1), ("threads", 0)], ids=str)
def test_dial_trains_on_fresh_batches_and_stops(
    topo_launch: Callable[..., RunningProgram], backend: str, caches: int
) -> None:
    run = topo_launch(
        PATH,
        backend=backend,
        params={"max_executor_steps": STEPS, "num_caches": caches},
    )
    assert run.wait(300) == 0, run.failure
    assert "coordinator" in run.launcher.state.stop_reason
    found = re.findall(r"final normalised reward: (-?[\d.]+)", run.log("evaluator"))
    assert found, run.log("evaluator")[-2000:]
    # An untrained network tells on day 1 or never; ~150 updates already beat that.
    assert float(found[-1]) > 0.0, found
    metrics = run.run_dir / "metrics"
    trainer = [json.loads(line) for line in (metrics / "trainer.jsonl").read_text().splitlines()]
    # The trainer took batches from the queue all along (the executors wait on it).
    assert max(int(r["trainer_steps"]) for r in trainer) >= 50
