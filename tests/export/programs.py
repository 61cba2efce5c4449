"""Launchpad programs for the export tests, built as Launchpad users write them: handles
passed positionally and by keyword, per-replica values, round-robin sources, thread and
process colocation. Their nodes are never run here: the exporter only reads the IR."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

import topo.launchpad as lp
from examples.agents.producers import Consumer, Producer
from topo.nodes import Counter, StepsLimiter


class Learner:
    """A learner: its replay, counter and (for secondaries) the primary."""

    def __init__(self, replay: Any, counter: Any = None, primary: Any = None) -> None:
        self.replay, self.counter, self.primary = replay, counter, primary


class Actor:
    """An actor with an index, an exploration rate and a variable source."""

    def __init__(
        self, actor_id: int, variable_source: Any, counter: Any, epsilon: float = 0.1, **tags: Any
    ) -> None:
        self.actor_id, self.variable_source, self.counter = actor_id, variable_source, counter
        self.epsilon, self.tags = epsilon, tags


class Evaluator:
    """Evaluates the policy of a variable source."""

    def __init__(self, variable_source: Any, episodes: int = 1) -> None:
        self.variable_source, self.episodes = variable_source, episodes


class Keyed:
    """A node taking a PRNG key."""

    def __init__(self, random_key: Any, counter: Any = None) -> None:
        self.random_key, self.counter = random_key, counter


class Stopper:
    """Holds the program stopper (an importable function)."""

    def __init__(self, counter: Any, stop_fn: Any) -> None:
        self.counter, self.stop_fn = counter, stop_fn


def build_replay() -> list[Any]:
    """The replay tables (never called by these tests)."""
    from examples.agents.mava import make_replay_tables

    return make_replay_tables()


def log_counts(counter: Any, every_s: float = 1.0) -> None:
    """A py node's function."""


def consumer_producers(num_producers: int = 3) -> lp.Program:
    """Launchpad's consumer/producers, as the seed writes it."""
    program = lp.Program("consumer_producers")
    with program.group("producer"):
        producers = [program.add_node(lp.CourierNode(Producer, i)) for i in range(num_producers)]
    node = lp.CourierNode(Consumer, producers=producers, work_items=8)
    program.add_node(node, label="consumer")
    return program


def everything(num_actors: int = 5, actors_per_process: int = 2) -> lp.Program:
    """Every construct the exporter writes: a split group, a mixed thread colocation, two
    groups as a round-robin pool, per-replica ints and floats, a per-process packing, a
    cacher, a py node, disable_run, call_timeout and thread-pool size, a host placement."""
    program = lp.Program("everything")
    with program.group("counter"):
        counter = program.add_node(lp.CourierNode(Counter, courier_kwargs={"thread_pool_size": 4}))
        program.add_node(lp.CourierNode(StepsLimiter, counter, 100))
    replay_node = lp.ReverbNode(build_replay)
    replay = replay_node.create_handle()
    learner_node = lp.CourierNode(
        Learner, replay, counter, courier_client_kwargs={"call_timeout": 5.0}
    )
    learner = learner_node.create_handle()
    program.add_node(lp.MultiThreadingColocation([learner_node, replay_node]), label="learner")
    with program.group("secondary"):
        secondaries = [
            program.add_node(lp.CourierNode(Learner, replay, primary=learner)) for _ in range(2)
        ]
    sources = [learner, *secondaries]
    with program.group("actor"):
        actors = [
            lp.CourierNode(
                Actor,
                i,
                sources[i % len(sources)],
                counter,
                epsilon=0.4**i,
                kind="actor",
                motto="costs $${x} and ${y}",  # not interpolated: written back escaped
                mention="@someone",  # not a reference
                schedule={"start": 1, "steps": [1.0, 2], "on": True, "off": None},
            )
            for i in range(num_actors)
        ]
        for start in range(0, num_actors, actors_per_process):
            program.add_node(
                lp.MultiThreadingColocation(actors[start : start + actors_per_process])
            )
    with program.group("cacher"):
        caches = [
            program.add_node(lp.CacherNode(learner, refresh_interval_ms=200, stale_after_ms=900))
            for _ in range(2)
        ]
    evaluators = [lp.CourierNode(Evaluator, cache, episodes=3) for cache in caches]
    for e in evaluators:
        e.disable_run()
    program.add_node(lp.MultiProcessingColocation(evaluators), label="evaluator")
    program.add_node(lp.PyNode(log_counts, counter, every_s=0.5), label="logger")
    program.add_node(lp.CourierNode(Stopper, counter, lp.make_program_stopper()), label="stopper")
    return program


RESOURCES = {"actor": lp.PythonProcess(env={"ACTOR_THREADS": "1", "MODE": "test"})}


@dataclasses.dataclass
class Config:
    """A config object: not plain data, not importable."""

    lr: float = 0.1


def with_closure() -> lp.Program:
    """A node built by a closure, and one by a lambda."""

    def build_actor(counter: Any) -> Actor:
        return Actor(0, None, counter)

    program = lp.Program("closure")
    counter = program.add_node(lp.CourierNode(Evaluator, None), label="counter")
    with program.group("actor"):
        for _ in range(3):
            program.add_node(lp.CourierNode(build_actor, counter))
    program.add_node(lp.CourierNode(lambda: Evaluator(None)), label="other")
    return program


def with_config() -> lp.Program:
    """A pickled config object as an argument, in every replica."""
    program = lp.Program("config")
    with program.group("actor"):
        for i in range(2):
            program.add_node(lp.CourierNode(Actor, i, None, None, cfg=Config()))
    return program


def with_keys(num: int = 3) -> lp.Program:
    """PRNG keys per node, as Acme splits them (numpy uint32 pairs here)."""
    program = lp.Program("keys")
    counter = program.add_node(lp.CourierNode(Evaluator, None), label="counter")
    with program.group("keyed"):
        for i in range(num):
            key = np.array([0, i + 7], dtype=np.uint32)
            program.add_node(lp.CourierNode(Keyed, key, counter))
    return program


def with_mixed() -> lp.Program:
    """Replicas that YAML cannot give one group: other RPC settings, other arguments."""
    program = lp.Program("mixed")
    with program.group("actor"):
        program.add_node(lp.CourierNode(Evaluator, None))
        program.add_node(lp.CourierNode(Evaluator, None, courier_kwargs={"thread_pool_size": 2}))
    with program.group("my learners"):
        program.add_node(lp.CourierNode(Learner, None, None))
        program.add_node(lp.CourierNode(Learner, None))
    return program


def not_a_program() -> dict[str, int]:
    """Returns something else."""
    return {"nodes": 1}


def raising(fail: bool = True) -> lp.Program:
    """Raises when asked to; prints (to stdout) as builders do."""
    print("building the program")
    if fail:
        raise ValueError("num_actors must be positive")
    return consumer_producers()


def tunable(
    num_actors: int = 3,
    epsilon: float = 0.25,
    flavour: str = "plain",
    greedy: bool = False,
    episodes: int = 2,
    workers: int | None = None,
) -> lp.Program:
    """Builder parameters used as they are (a count, argument values of every kind), one
    used only through a derived value (``episodes * 10``), one without a plain value."""
    program = lp.Program("tunable")
    counter = program.add_node(lp.CourierNode(Counter), label="counter")
    with program.group("actor"):
        for i in range(num_actors):
            node = lp.CourierNode(
                Actor, i, counter, counter, epsilon=epsilon, flavour=flavour, greedy=greedy
            )
            program.add_node(node)
    program.add_node(lp.CourierNode(Evaluator, counter, episodes=episodes * 10), label="eval")
    return program
