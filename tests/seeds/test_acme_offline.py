"""acme_offline.yaml builds Acme's make_distributed_offline_experiment program."""

from __future__ import annotations

import itertools

import pytest
from seed_support import EXAMPLES, KEY, SeedProgram, assert_mirrors, compile_seed

PATH = EXAMPLES / "acme_offline.yaml"
MAKE_ACTOR = object()  # experiment.builder.make_actor: a function, not a handle


def seed(max_learner_steps: int | None, num_evaluators: int, snapshots: bool) -> SeedProgram:
    """make_distributed_offline_experiment, transcribed (one evaluator per factory)."""
    lp = SeedProgram()
    counter = lp.add(lp.node("counter", ""))
    if max_learner_steps is not None:
        limiter = lp.node(
            "steps_limiter",
            "counter, max_steps, steps_key",
            counter,
            max_learner_steps,
            steps_key="learner_steps",
        )
        lp.add(limiter, stops=True)
    learner_node = lp.node("learner", "random_key, counter", KEY, counter)
    learner = learner_node
    lp.add(learner_node)
    for i in range(num_evaluators):
        signature = "random_key, variable_source, counter, make_actor"
        lp.add(lp.node(f"evaluator/{i}", signature, KEY, learner, counter, MAKE_ACTOR))
    checkpointing_config = True  # defaulted to CheckpointingConfig() when None
    if snapshots and checkpointing_config:
        lp.add(lp.node("model_saver", "variable_source", learner))
    return lp


@pytest.mark.parametrize(
    ("max_learner_steps", "num_evaluators", "snapshots"),
    list(itertools.product([None, 0, 500], [0, 1, 3], [False, True])),
)
def test_acme_offline_mirrors_the_seed(
    max_learner_steps: int | None, num_evaluators: int, snapshots: bool
) -> None:
    params = {
        "max_learner_steps": max_learner_steps,
        "num_evaluators": num_evaluators,
        "snapshots": snapshots,
    }
    program = compile_seed(PATH, params)
    assert_mirrors(program, seed(max_learner_steps, num_evaluators, snapshots))


def test_acme_offline_defaults() -> None:
    assert_mirrors(compile_seed(PATH, {}), seed(10_000, 1, False))
