"""mava_dial.yaml end to end with a tiny budget: it stops by itself (at the first
evaluation that shows it learned, or at the steps limit), the trainer learns
from fresh batches (the Reverb queue hands every played episode to the trainer once),
and the greedy policy already does better than telling at random.

Reaching the optimum takes about 40,000 episodes: ``bench/dial_bench.py`` measures it."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.agents.learning import DIAL, assert_dial_learned
from topo.api import RunningProgram

PATH = "examples/topologies/mava_dial.yaml"


@pytest.mark.slow
@pytest.mark.parametrize(("backend", "caches"), [("procs", 1), ("threads", 0)], ids=str)
def test_dial_trains_on_fresh_batches_and_stops(
    topo_launch: Callable[..., RunningProgram], backend: str, caches: int
) -> None:
    run = topo_launch(
        PATH,
        backend=backend,
        params={**DIAL, "num_caches": caches},
    )
    assert run.wait(300) == 0, run.failure
    reason = run.launcher.state.stop_reason
    assert "coordinator" in reason or "stop_at_reward" in reason, reason
    assert_dial_learned(run.log("evaluator"), run.run_dir / "metrics")
