"""acme_colocated.yaml builds Acme's DistributedLayout.build program (the colocation switch)."""

from __future__ import annotations

import itertools

import pytest
from seed_support import EXAMPLES, KEY, SeedProgram, assert_mirrors, compile_seed

PATH = EXAMPLES / "acme_colocated.yaml"
MAKE_ACTOR = object()  # the layout's make_actor closure: a function, not a handle


def seed(
    num_actors: int,
    colocate: bool,
    num_evaluators: int,
    max_number_of_steps: int | None,
    checkpointing: bool,
    snapshots: bool,
) -> SeedProgram:
    """DistributedLayout.build, transcribed."""
    lp = SeedProgram()
    replay_node = lp.node("replay", "tables")
    if colocate:
        replay = replay_node  # replay_node.create_handle()
    else:
        replay = lp.add(replay_node)
    counter = lp.add(lp.node("counter", ""))
    if max_number_of_steps is not None:
        coordinator = lp.node("coordinator", "counter, max_steps", counter, max_number_of_steps)
        lp.add(coordinator, stops=True)
    learner_node = lp.node("learner", "random_key, replay, counter", KEY, replay, counter)
    if colocate:
        learner = learner_node
        lp.add(learner_node, replay_node)
    else:
        learner = lp.add(learner_node)
    for i in range(num_evaluators):
        signature = "random_key, variable_source, counter, make_actor"
        lp.add(lp.node(f"evaluator/{i}", signature, KEY, learner, counter, MAKE_ACTOR))
    for actor_id in range(num_actors):
        signature = "random_key, replay, variable_source, counter, actor_id"
        lp.add(lp.node(f"actor/{actor_id}", signature, KEY, replay, learner, counter, actor_id))
    if snapshots and checkpointing:
        lp.add(lp.node("model_saver", "variable_source", learner))
    return lp


CASES = list(
    itertools.product([0, 3], [True, False], [0, 2], [None, 7], [True, False], [True, False])
)


@pytest.mark.parametrize(
    ("num_actors", "colocate", "num_evaluators", "max_steps", "checkpointing", "snapshots"),
    CASES,
)
def test_acme_colocated_mirrors_the_seed(
    num_actors: int,
    colocate: bool,
    num_evaluators: int,
    max_steps: int | None,
    checkpointing: bool,
    snapshots: bool,
) -> None:
    params = {
        "num_actors": num_actors,
        "colocate_learner_and_replay": colocate,
        "num_evaluators": num_evaluators,
        "max_actor_steps": max_steps,
        "checkpointing": checkpointing,
        "snapshots": snapshots,
    }
    program = compile_seed(PATH, params)
    assert_mirrors(
        program, seed(num_actors, colocate, num_evaluators, max_steps, checkpointing, snapshots)
    )


def test_acme_colocated_defaults_colocate() -> None:
    # The example's default max_actor_steps (50000) gives it a coordinator: it stops by itself.
    program = compile_seed(PATH, {})
    assert_mirrors(program, seed(2, True, 1, 50_000, True, False))
    [exe] = [e for e in program.executables if "learner" in e.nodes]
    assert exe.mode == "set" and set(exe.nodes) == {"learner", "replay"}
