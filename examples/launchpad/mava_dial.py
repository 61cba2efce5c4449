"""Mava's DIAL system ``build``, written as the seed writes it, with module-level
builders in place of the system's methods and the stand-in agents of ``agents.py``.
Exports to the shape of ``examples/topologies/mava_dial.yaml``::

    topo export examples.launchpad.mava_dial:make_program -o agent.yaml
"""

from __future__ import annotations

from typing import Any

import topo.launchpad as lp
from examples.launchpad import agents
from topo.nodes import Counter, StepsLimiter


def replay_tables() -> list[Any]:
    """The system's ``replay``: the Reverb tables."""
    return agents.make_replay_tables()


def make_program(
    num_executors: int = 2,
    num_caches: int = 1,
    checkpoint: bool = True,
    max_executor_steps: int | None = 100_000,
    name: str = "mava_dial",
) -> lp.Program:
    """Build the distributed system as a graph program."""
    program = lp.Program(name=name)

    counter = None
    with program.group("replay"):
        replay = program.add_node(lp.ReverbNode(replay_tables))

    if checkpoint:
        with program.group("counter"):
            counter = program.add_node(lp.CourierNode(Counter))

    if max_executor_steps:
        with program.group("coordinator"):
            _ = program.add_node(
                lp.CourierNode(
                    StepsLimiter, counter, max_executor_steps, "executor_steps", poll_s=0.1
                )
            )

    with program.group("trainer"):
        trainer = program.add_node(lp.CourierNode(agents.Trainer, replay, counter))

    with program.group("evaluator"):
        program.add_node(lp.CourierNode(agents.MavaEvaluator, trainer, counter, trainer))

    if not num_caches:
        # Use the trainer as a single variable source.
        sources = [trainer]
    else:
        with program.group("cacher"):
            # Create a set of trainer caches.
            sources = []
            for _ in range(num_caches):
                cacher = program.add_node(
                    lp.CacherNode(trainer, refresh_interval_ms=2000, stale_after_ms=4000)
                )
                sources.append(cacher)

    with program.group("executor"):
        # Add executors which pull round-robin from our variable sources.
        for executor_id in range(num_executors):
            source = sources[executor_id % len(sources)]
            program.add_node(
                lp.CourierNode(agents.Executor, executor_id, replay, source, counter, trainer)
            )

    return program
