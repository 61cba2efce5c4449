"""The DQN example on other environments than CartPole (``-p env=...``): the network and
the replay's signature are made from the environment's spec, and the agent learns a
dm_env environment through the adapter."""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tests.agents.learning import evaluations

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax", "dm_env")),
        reason="needs the rl and reverb extras",
    ),
]
ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
TINY = {"num_actors": 2, "min_replay_size": 200, "samples_per_insert": 8.0, "eval_every_s": 2.0}


def test_on_acrobot_the_network_has_its_three_actions(
    topo_launch: Callable, tmp_path: Path
) -> None:
    params = {
        **TINY,
        "env": "Acrobot-v1",
        "max_actor_steps": 2_000,
        "snapshots": True,
        "snapshot_dir": str(tmp_path / "snapshots"),
        "snapshot_every_s": 1.0,  # (the final one may find the learner gone)
    }
    run = topo_launch(PATH, "procs", params=params)
    assert run.wait(240) == 0, run.failure
    returns = evaluations(run.log("evaluator/0"))
    assert all(-500.0 <= r <= 0.0 for r in returns), returns  # Acrobot: -1 a step
    [last] = sorted((tmp_path / "snapshots").glob("params_*.npz"))[-1:]
    layers = np.load(last)
    shapes = sorted(v.shape for k, v in layers.items() if k.endswith("/w"))
    assert (6, 64) in shapes and (64, 3) in shapes, shapes  # observations of 6, 3 actions


def test_the_agent_learns_a_dm_env_corridor(topo_launch: Callable, tmp_path: Path) -> None:
    """Walking towards the end the observation shows always reaches the goal (return 1);
    a random walk, or a policy blind to the cue, half the time. The run ends at the
    second evaluation of 1.0 in a row, which must come after the learner learned."""
    params = {
        **TINY,
        "env": "dm_env:tests.agents.dm_corridor:corridor",
        "max_actor_steps": 20_000,
        "stop_at_return": 1.0,
        "stop_at_return_for": 2,  # two evaluations in a row
        "n_step": 1,
    }
    run = topo_launch(PATH, "procs", params=params)
    assert run.wait(240) == 0, run.failure
    log = run.log("evaluator/0")
    assert "2 evaluations in a row reached stop_at_return=1: stopping" in log, log[-2000:]
    reached = re.findall(r"learner_steps=(\d+) mean return over 10 episodes: 1.0", log)
    assert reached and int(reached[-1]) > 0, log[-2000:]  # not an untrained network's luck
    # and one final evaluation, of the learner's last parameters. Not bounded: at this
    # budget (a few hundred learner steps) a few more steps after the stop can set the
    # policy back for a while -- 0.9 and 0.6 seen in fresh-clone runs after two 1.0s in
    # a row; what shows it learned are those two, above
    assert len(evaluations(log)) >= 3, log[-2000:]
