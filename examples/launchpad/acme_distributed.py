"""Acme's ``make_distributed_experiment``, written as the seed writes it, with the
stand-in agents of ``agents.py`` and topo's Counter and StepsLimiter. Exports to the
shape of ``examples/topologies/acme_distributed.yaml``::

    topo export examples.launchpad.acme_distributed:make_program -o agent.yaml
"""

from __future__ import annotations

import itertools
from typing import Any

import jax

import topo.launchpad as lp
from examples.launchpad import agents
from topo.nodes import Counter, StepsLimiter


def build_replay() -> list[Any]:
    """The replay storage."""
    return agents.make_replay_tables()


def build_counter() -> Counter:
    return Counter()


def build_learner(
    random_key: Any, replay: Any, counter: Any = None, primary_learner: Any = None
) -> agents.Learner:
    """The learning part of the agent."""
    return agents.Learner(random_key, replay, counter, primary_learner)


def build_actor(
    random_key: Any, replay: Any, variable_source: Any, counter: Any, actor_id: int
) -> agents.Actor:
    """The actor process."""
    return agents.Actor(random_key, replay, variable_source, counter, actor_id)


def build_model_saver(variable_source: Any) -> agents.ModelSaver:
    return agents.ModelSaver(variable_source)


def make_program(
    num_actors: int = 4,
    num_actors_per_node: int = 1,
    num_learners: int = 1,
    colocate_learner_and_replay: bool = False,
    num_evaluators: int = 1,
    max_actor_steps: int | None = 50_000,
    snapshots: bool = False,
    seed: int = 0,
    name: str = "acme_distributed",
) -> lp.Program:
    """Builds distributed agent based on a builder."""
    if colocate_learner_and_replay and num_learners > 1:
        raise ValueError(
            "Replay and learner colocation is not yet supported when the learner is spread "
            f"across multiple nodes (num_learner_nodes > 1). Got num_learners={num_learners}."
        )
    program = lp.Program(name=name)
    key = jax.random.PRNGKey(seed)

    replay_node = lp.ReverbNode(build_replay, checkpoint_time_delta_minutes=None)
    replay = replay_node.create_handle()

    counter = program.add_node(lp.CourierNode(build_counter), label="counter")
    if max_actor_steps is not None:
        program.add_node(
            lp.CourierNode(StepsLimiter, counter, max_actor_steps, poll_s=0.1), label="counter"
        )

    learner_key, key = jax.random.split(key)
    learner_node = lp.CourierNode(build_learner, learner_key, replay, counter)
    learner = learner_node.create_handle()
    variable_sources = [learner]

    if colocate_learner_and_replay:
        program.add_node(lp.MultiThreadingColocation([learner_node, replay_node]), label="learner")
    else:
        program.add_node(replay_node, label="replay")
        with program.group("learner"):
            program.add_node(learner_node)
            # Secondary learners (multi-host accelerators): no counter, no checkpoints.
            for _ in range(1, num_learners):
                learner_key, key = jax.random.split(key)
                variable_sources.append(
                    program.add_node(
                        lp.CourierNode(build_learner, learner_key, replay, primary_learner=learner)
                    )
                )

    with program.group("actor"):
        *actor_keys, key = jax.random.split(key, num_actors + 1)
        sources = itertools.cycle(variable_sources)
        actor_nodes = [
            lp.CourierNode(build_actor, akey, replay, vsource, counter, aid)
            for aid, (akey, vsource) in enumerate(zip(actor_keys, sources, strict=False))
        ]
        if num_actors_per_node == 1:
            for actor_node in actor_nodes:
                program.add_node(actor_node)
        else:
            for i in range(0, num_actors, num_actors_per_node):
                program.add_node(
                    lp.MultiThreadingColocation(actor_nodes[i : i + num_actors_per_node])
                )

    for evaluator in [agents.Evaluator] * num_evaluators:
        evaluator_key, key = jax.random.split(key)
        program.add_node(
            lp.CourierNode(evaluator, evaluator_key, learner, counter, agents.make_actor),
            label="evaluator",
        )

    if snapshots:
        program.add_node(lp.CourierNode(build_model_saver, learner), label="model_saver")

    return program
