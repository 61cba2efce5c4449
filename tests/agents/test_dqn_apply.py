"""``topo apply`` on the distributed DQN example while it trains: from 2 to 8 actors and
back to 2. The learner never stops (same process, no restart), ``actor_steps`` keeps
rising, each new actor acts, and the actors kept across a change keep their state."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest

from topo.testing import wait_until

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)

ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
# Run until stopped. The rate limiter holds the actors to one insert per four learner
# steps (256 samples per insert, batches of 64): the learner alone runs flat out, not
# the learner and eight actors (the test took whatever CPU the machine had: 47 CPU-s on
# an idle machine, 123 in a loaded suite).
BASE = {"max_actor_steps": None, "samples_per_insert": 256.0, "min_replay_size": 500}


def _steps(counter: object) -> float:
    return float(counter.get_counts().get("actor_steps", 0))  # type: ignore[attr-defined]


def _episodes(path: Path) -> int:
    """The episodes an actor wrote to its metrics file so far."""
    return path.read_text().count("episode_return") if path.is_file() else 0


def _steps_go_on(counter: object) -> None:
    """Wait until the actors count more steps than now (an actor's steps reach the counter
    when its episode ends, at most once a second: held to the learner by the rate
    limiter, on a loaded machine that takes seconds)."""
    before = _steps(counter)
    wait_until(lambda: _steps(counter) > before, 120, what="the actors' steps to go on")


@pytest.mark.slow
def test_apply_grows_and_shrinks_the_actors_while_the_learner_trains(
    topo_launch: Callable,
) -> None:
    run = topo_launch(PATH, "procs", params={**BASE, "num_actors": 2}, ready_timeout=240)
    assert run.wait_ready(240)
    counter = run.handle("counter", timeout=30)
    learner = run.launcher.state.nodes["learner"]
    learner_pid = learner.pid
    # the actors' first parameters fetched, the replay filling
    wait_until(lambda: _steps(counter) > 0, 120, what="the actors' first steps")
    _steps_go_on(counter)

    up = run.apply(PATH, {**BASE, "num_actors": 8}, timeout=240)
    assert up.result == "applied", up.record
    assert sorted(run.launcher.state.nodes).count("actor/7") == 1
    # each new actor acts (its episodes in its metrics); that 8 step faster than 2 on
    # free cores is the benchmark's to say (bench/dqn_bench.py), not a busy machine's
    metrics = run.run_dir / "metrics"
    wait_until(
        lambda: all(_episodes(metrics / f"actor_{i}.jsonl") for i in range(2, 8)),
        120,
        what="an episode from each new actor",
    )
    _steps_go_on(counter)

    steps_before = _steps(counter)
    down = run.apply(PATH, {**BASE, "num_actors": 2}, timeout=240)
    assert down.result == "applied", down.record
    assert "actor/7" not in run.launcher.state.nodes
    _steps_go_on(counter)
    assert _steps(counter) > steps_before
    # The learner never stopped: same process, no restart, learning all along.
    assert learner.pid == learner_pid and learner.restarts == 0
    assert run.launcher.state.nodes["learner"].state == "running"
    assert up.record is not None and down.record is not None
    texts = [s["text"] for s in up.record["steps"] + down.record["steps"]]
    assert any("kept the state of actor/0" in t for t in texts), texts
