"""On the mixed dataset, behaviour cloning falls clearly short of the best policy in it,
and filtered BC (the offline RL learner acme_offline.yaml runs by default) reaches it.

The offline agent's own Learner trains in this process on one recorded dataset; greedy
evaluation episodes on fixed seeds."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topo.targets import prepare

ROOT = Path(__file__).resolve().parents[2]
assert prepare(str(ROOT / "examples/topologies/acme_offline.yaml"), "examples.agents") is None
offline: Any = importlib.import_module("examples.agents.offline")
demos: Any = importlib.import_module("examples.agents.demonstrations")
common: Any = importlib.import_module("examples.agents.common")
STEPS = 1000
EVAL_EPISODES = 10


@pytest.fixture(scope="module")
def dataset() -> Any:
    return demos.record_episodes(episodes=100, seed=0)


def trained_return(data: Any, algorithm: str, seed: int) -> float:
    learner = offline.Learner(
        [0, seed],
        dataset=lambda key, **_: demos.batches(data, 256, seed),
        algorithm=algorithm,
        print_every_s=1e9,
    )
    learner.run(num_steps=STEPS)
    [params] = learner.get_variables(["policy"])
    env = common.make_environment(0)
    policy = offline.greedy_policy(params)
    return float(np.mean([common.run_episode(env, policy, 10_000 + i) for i in range(10)]))


@pytest.mark.slow
def test_bc_falls_short_of_the_best_policy_and_filtered_bc_reaches_it(dataset: Any) -> None:
    returns = dataset.returns_by_policy()
    best = max(r.mean() for r in returns.values())
    assert best == returns["good"].mean() >= 475
    bc = trained_return(dataset, "bc", 0)
    filtered = trained_return(dataset, "filtered_bc", 0)
    assert bc < 0.8 * best, bc  # cloning the mix plays much like the mediocre policy
    assert filtered >= 0.95 * best, filtered
    assert filtered > bc + 100
