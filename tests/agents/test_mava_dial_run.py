"""mava_dial.yaml end to end: it stops by itself and DIAL learns to communicate.

The best policy found without communication scores 0.72 of the oracle on 3 prisoners
(``bench/switch_baseline.py`` hill-climbs over every tell-or-wait rule on the day and
one's own visits, scored exactly), so over 0.8 shows that the bulb carries information."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from topo.api import RunningProgram

PATH = "examples/topologies/mava_dial.yaml"
NO_COMMUNICATION = 0.72


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "caches"), [("procs", 1), ("threads", 0), ("procs", 2)], ids=str
)
def test_dial_learns_to_use_the_bulb(
    topo_launch: Callable[..., RunningProgram], backend: str, caches: int
) -> None:
    run = topo_launch(
        PATH,
        backend=backend,
        params={"max_executor_steps": 30_000, "num_caches": caches},
    )
    assert run.wait(240) == 0, run.failure
    assert "coordinator" in run.launcher.stop_reason
    found = re.findall(r"final normalised reward: (-?[\d.]+)", run.log("evaluator"))
    assert found, run.log("evaluator")[-2000:]
    assert float(found[-1]) > NO_COMMUNICATION + 0.08
