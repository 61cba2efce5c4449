"""The offline agent on other environments than CartPole (``-p env=...``): its networks
are made for the environment's actions, its evaluators play it, and a dataset played
elsewhere is refused by name."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.agents.learning import OFFLINE_FINAL

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("haiku", "jax", "dm_env")),
    reason="needs the rl extra",
)
ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "examples" / "topologies" / "acme_offline.yaml"
CORRIDOR = "dm_env:tests.agents.dm_corridor:corridor"


@pytest.mark.slow
def test_behaviour_cloning_learns_a_dm_env_corridor_from_its_own_data(
    topo_launch: Callable,
) -> None:
    params = {
        "env": CORRIDOR,
        "dataset": "tests.agents.offline_corridor:corridor_dataset",
        "learner": "bc",
        "max_learner_steps": 400,
        "eval_every_s": 1.0,
        "eval_episodes": 20,
    }
    run = topo_launch(PATH, "threads", params=params)
    assert run.wait(240) == 0, run.failure
    log = run.log("evaluator/0")
    [final] = OFFLINE_FINAL.findall(log)
    # the guide's half of the data reaches the goal 86-96 % of the time, the random
    # half 40-60 % (the data 63-78 %): the clone of the majority action reaches it 88-100 %
    # (in-process, 100-1,400 steps, two seeds), a policy blind to the cue 50 %
    assert float(final) >= 0.8, log[-2000:]


def test_a_dataset_played_on_another_environment_is_refused_by_name() -> None:
    from examples.agents import demonstrations as demos
    from examples.agents.offline import Learner

    def cartpole(random_key: object, **_: object) -> object:
        return demos.batches(demos.record_episodes(2, 0), 8, 0)

    with pytest.raises(ValueError, match="4 values, Acrobot-v1's have 6"):
        Learner([0, 0], dataset=cartpole, env="Acrobot-v1", print_every_s=1e9)
    from tests.agents.offline_corridor import corridor_dataset

    # the corridor's observations (6 values) with Acrobot's 6: the actions fit too (0, 1)
    learner = Learner([0, 0], dataset=corridor_dataset, env="Acrobot-v1", print_every_s=1e9)
    [params] = learner.get_variables(["policy"])
    assert [p["w"].shape[1] for p in params.values()][-1] == 3  # Acrobot's three actions
