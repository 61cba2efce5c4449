"""The Acme distributed DQN with a replay that restarts: the replay is killed mid-run and
restarts on its address, restoring its checkpoint; the actors' writers, the learner's
dataset and its priority updates reconnect by themselves and training goes on."""

from __future__ import annotations

import importlib.util
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from topo.testing import wait_gone, wait_until

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)

ROOT = Path(__file__).resolve().parents[2]
REPLAY = "    kind: reverb\n"


def _with_restarting_replay(tmp_path: Path) -> Path:
    """acme_distributed.yaml whose replay restarts on failure and checkpoints every 2 s."""
    text = (ROOT / "examples" / "topologies" / "acme_distributed.yaml").read_text()
    assert text.count(REPLAY) == 1
    extra = (
        f"    checkpoint: {{dir: '{tmp_path / 'ckpt'}', every_s: 2}}\n"
        "    restart: {policy: on-failure, max_restarts: 2, backoff: {initial_s: 0.1}}\n"
    )
    path = tmp_path / "acme_restarting_replay.yaml"
    path.write_text(text.replace(REPLAY, REPLAY + extra))
    return path


def _counts(run: object, keys: tuple[str, ...]) -> dict[str, int]:
    counts = run.handle("counter", timeout=30).get_counts()  # type: ignore[attr-defined]
    return {k: int(counts.get(k, 0)) for k in keys}


def _above(run: object, above: dict[str, int], timeout: float) -> dict[str, int]:
    """The counter's counts once every count in ``above`` is exceeded."""

    def counts() -> dict[str, int] | None:
        now = _counts(run, tuple(above))
        return now if all(now[k] > v for k, v in above.items()) else None

    return wait_until(counts, timeout, what=f"counts above {above}", every=0.5)


def _written_since(path: Path, since: float) -> bool:
    """Whether a file under ``path`` was written after ``since`` (a ``time.time()``)."""
    return any(p.is_file() and p.stat().st_mtime > since for p in path.rglob("*"))


@pytest.mark.slow
def test_training_goes_on_after_the_replay_is_killed_and_restarts(
    topo_launch: Callable, tmp_path: Path
) -> None:
    params = {
        "num_actors": 2,
        "max_actor_steps": None,
        "min_replay_size": 200,
        "samples_per_insert": 8.0,
        "eval_every_s": 30.0,
    }
    run = topo_launch(_with_restarting_replay(tmp_path), "procs", params=params)
    keys = ("actor_steps", "learner_steps")
    before = _above(run, {"actor_steps": 2_000, "learner_steps": 200}, 180)
    assert before["learner_steps"] > 200, before
    since = time.time()
    wait_until(lambda: _written_since(tmp_path / "ckpt", since), 30, what="a checkpoint")
    address = run.handle("replay", timeout=30).address()
    victim = run.launcher.pids()["replay"]
    os.kill(victim, signal.SIGKILL)
    assert not wait_gone([victim], 15)
    replay = run.launcher.state.nodes["replay"]
    wait_until(lambda: replay.restarts == 1 and replay.state == "running", 60)
    assert run.handle("replay", timeout=30).address() == address  # the same address
    after = _counts(run, keys)
    _above(run, {k: v + 500 for k, v in after.items()}, 90)
    assert run.exit_code is None, run.failure
    stalled = [n.id for n in run.launcher.state.nodes.values() if n.stalled_s is not None]
    assert not stalled
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)
