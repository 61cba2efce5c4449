"""Acme's ``make_distributed_offline_experiment``, written as the seed writes it, with
the stand-in agents of ``agents.py`` and topo's Counter and StepsLimiter. Exports to
the shape of ``examples/topologies/acme_offline.yaml``::

    topo export examples.launchpad.acme_offline:make_program -o agent.yaml
"""

from __future__ import annotations

from typing import Any

import jax

import topo.launchpad as lp
from examples.launchpad import agents
from topo.nodes import Counter, StepsLimiter


def build_counter() -> Counter:
    return Counter()


def build_learner(random_key: Any, counter: Any = None) -> agents.Learner:
    """The learning part of the agent (trained from a fixed dataset: no replay)."""
    return agents.Learner(random_key, None, counter)


def build_model_saver(variable_source: Any) -> agents.ModelSaver:
    return agents.ModelSaver(variable_source)


def make_program(
    max_learner_steps: int | None = 10_000,
    num_evaluators: int = 1,
    snapshots: bool = False,
    seed: int = 0,
    name: str = "acme_offline",
) -> lp.Program:
    """Builds distributed agent based on a builder."""
    program = lp.Program(name=name)
    key = jax.random.PRNGKey(seed)

    counter = program.add_node(lp.CourierNode(build_counter), label="counter")
    if max_learner_steps is not None:
        program.add_node(
            lp.CourierNode(
                StepsLimiter, counter, max_learner_steps, steps_key="learner_steps", poll_s=0.1
            ),
            label="counter",
        )

    learner_key, key = jax.random.split(key)
    learner_node = lp.CourierNode(build_learner, learner_key, counter)
    learner = learner_node.create_handle()
    program.add_node(learner_node, label="learner")

    for evaluator in [agents.Evaluator] * num_evaluators:
        evaluator_key, key = jax.random.split(key)
        program.add_node(
            lp.CourierNode(evaluator, evaluator_key, learner, counter, agents.make_actor),
            label="evaluator",
        )

    if snapshots:
        program.add_node(lp.CourierNode(build_model_saver, learner), label="model_saver")

    return program
