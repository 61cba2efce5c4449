"""The consumer_producers example stops within the grace while its consumer is still
sending its work items: with many items the fan-out takes seconds, and a stop asked
meanwhile used to wait for all of them to be sent (the consumer was killed after the
grace)."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from tests.conftest import EXAMPLES
from topo.testing import wait_gone, wait_until


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["threads", "procs"])
def test_a_stop_during_the_consumers_fan_out_ends_it_within_the_grace(
    topo_launch: Callable, backend: str
) -> None:
    # 300,000 items take far longer than a second to send on this machine
    run = topo_launch(EXAMPLES / "consumer_producers.yaml", backend, params={"work_items": 300_000})
    assert run.wait_ready(120)
    producer = run.handle("producer/0", timeout=30)
    wait_until(lambda: producer.stats()["done"] > 0, 60, what="the fan-out under way")
    assert run.wait(0) is None, "the consumer was done before the stop: more items needed"
    run.stop("stopped by the test", timeout=30)
    assert run.launcher.done
    assert not wait_gone(run.pids(), 15)
    status = json.loads((run.run_dir / "status.json").read_text())
    assert not [w for w in status["warnings"] if "grace period" in w], status["warnings"]
    assert "stopped before every result came" in run.log("consumer")
