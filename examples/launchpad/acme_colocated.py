"""Acme's ``DistributedLayout.build`` (the earlier distributed layout), written as the
seed writes it, with module-level builders in place of the layout's methods (bound
methods cannot be named in YAML) and the stand-in agents of ``agents.py``. Exports to
the shape of ``examples/topologies/acme_colocated.yaml``::

    topo export examples.launchpad.acme_colocated:make_program -o agent.yaml
"""

from __future__ import annotations

from typing import Any

import jax

import topo.launchpad as lp
from examples.launchpad import agents
from topo.nodes import Counter, StepsLimiter


def build_replay() -> list[Any]:
    """The layout's ``replay``: the Reverb tables."""
    return agents.make_replay_tables()


def build_counter() -> Counter:
    """The layout's ``counter``."""
    return Counter()


def build_coordinator(counter: Any, max_actor_steps: int) -> StepsLimiter:
    """The layout's ``coordinator``: stops the program after ``max_actor_steps``."""
    return StepsLimiter(counter, max_actor_steps, steps_key="actor_steps", poll_s=0.1)


def make_program(
    num_actors: int = 2,
    colocate_learner_and_replay: bool = True,
    num_evaluators: int = 1,
    max_actor_steps: int | None = 50_000,
    snapshots: bool = False,
    checkpointing: bool = True,
    seed: int = 0,
    name: str = "acme_colocated",
) -> lp.Program:
    """Build the distributed agent topology."""
    program = lp.Program(name=name)
    key = jax.random.PRNGKey(seed)
    evaluator_factories = [agents.Evaluator] * num_evaluators

    replay_node = lp.ReverbNode(build_replay, checkpoint_time_delta_minutes=None)
    with program.group("replay"):
        if colocate_learner_and_replay:
            replay = replay_node.create_handle()
        else:
            replay = program.add_node(replay_node)

    with program.group("counter"):
        counter = program.add_node(lp.CourierNode(build_counter))
        if max_actor_steps is not None:
            _ = program.add_node(lp.CourierNode(build_coordinator, counter, max_actor_steps))

    learner_key, key = jax.random.split(key)
    learner_node = lp.CourierNode(agents.Learner, learner_key, replay, counter)
    with program.group("learner"):
        if colocate_learner_and_replay:
            learner = learner_node.create_handle()
            program.add_node(lp.MultiThreadingColocation([learner_node, replay_node]))
        else:
            learner = program.add_node(learner_node)

    with program.group("evaluator"):
        for evaluator in evaluator_factories:
            evaluator_key, key = jax.random.split(key)
            program.add_node(
                lp.CourierNode(evaluator, evaluator_key, learner, counter, agents.make_actor)
            )

    with program.group("actor"):
        for actor_id in range(num_actors):
            actor_key, key = jax.random.split(key)
            program.add_node(
                lp.CourierNode(agents.Actor, actor_key, replay, learner, counter, actor_id)
            )

    if snapshots and checkpointing:
        with program.group("model_saver"):
            program.add_node(lp.CourierNode(agents.ModelSaver, learner))

    return program
