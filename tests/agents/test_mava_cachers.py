"""Cachers at work, wired as mava_dial.yaml wires them: many executors cause about one
trainer call per refresh interval per cacher, and no executor gets variables older than
the stale bound."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from topo.api import RunningProgram

HERE = Path(__file__).parent
if str(HERE) not in sys.path:  # cache_nodes must import in the launcher and the fork server
    sys.path.insert(0, str(HERE))

TOPOLOGY = """
name: cachers
params:
  num_executors: 6
  num_caches: 2
nodes:
  trainer: {target: "cache_nodes:CountingTrainer"}
  cacher:
    kind: cacher
    count: ${num_caches}
    source: "@trainer"
    refresh_ms: 200
    stale_ms: 400
  executor:
    target: "cache_nodes:Poller"
    count: ${num_executors}
    colocate: {per_process: 3}
    args:
      executor_id: ${replica}
      variable_source:
        round_robin: ["@cacher"]
        fallback: ["@trainer"]
"""
SECONDS = 3.0


@pytest.mark.slow
@pytest.mark.parametrize("caches", [2, 0])
def test_cachers_bound_trainer_calls_and_staleness(
    topo_launch: Callable[..., RunningProgram], tmp_path: Path, caches: int
) -> None:
    path = tmp_path / "cachers.yaml"
    path.write_text(TOPOLOGY)
    run = topo_launch(path, backend="procs", params={"num_caches": caches}, ready_timeout=60)
    trainer = run.handle("trainer")
    executors = [run.handle(f"executor/{i}") for i in range(6)]
    # The trainer's calls are counted over a window that holds the executors' one, so
    # requests made before it (executors start first) or after it count on neither side.
    started, start_calls = time.monotonic(), trainer.get_calls()
    before = sum(e.stats()["requests"] for e in executors)
    time.sleep(SECONDS)
    stats = [e.stats() for e in executors]
    calls, elapsed = trainer.get_calls() - start_calls, time.monotonic() - started
    assert run.stop(timeout=60) == 0
    requests = sum(s["requests"] for s in stats) - before
    if caches == 0:  # every request reaches the trainer
        assert calls >= 0.9 * requests > 100, (calls, requests)
        return
    # About one call per 200 ms per cacher: at most elapsed / 0.2 + 1 each (plus slack
    # for a refresh under way at either end), and far fewer than requests.
    assert calls <= caches * (elapsed / 0.2 + 3), (calls, requests, elapsed)
    assert calls >= caches * (SECONDS / 0.2) * 0.5, (calls, requests)
    assert requests > 10 * calls
    # The stale bound, plus a refresh RPC on a loaded machine (one took 0.19 s beside three
    # other test workers); a cacher that stopped refreshing would reach the 3 s window.
    assert max(s["max_age_s"] for s in stats) < 0.4 + 0.6
    assert all(s["versions"] > 1 for s in stats)  # the executors see the refreshes
