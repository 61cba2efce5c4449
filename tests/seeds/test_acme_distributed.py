"""acme_distributed.yaml builds Acme's make_distributed_experiment program."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from seed_support import EXAMPLES, KEY, SeedProgram, assert_mirrors, compile_seed

from topo.diagnostics import TopoError

PATH = EXAMPLES / "acme_distributed.yaml"
MAKE_ACTOR = object()  # experiment.builder.make_actor: a function, not a handle


@dataclass(frozen=True)
class Args:
    """make_distributed_experiment's topology arguments, with the seed's defaults."""

    num_actors: int = 4
    num_learner_nodes: int = 1
    num_actors_per_node: int = 1
    multithreading_colocate_learner_and_reverb: bool = False
    num_evaluators: int = 1  # len(experiment.get_evaluator_factories())
    max_num_actor_steps: int | None = None
    make_snapshot_models: bool = False

    def params(self) -> dict[str, object]:
        """The same settings as the YAML's -p parameters."""
        return {
            "num_actors": self.num_actors,
            "num_learners": self.num_learner_nodes,
            "num_actors_per_node": self.num_actors_per_node,
            "colocate_learner_and_replay": self.multithreading_colocate_learner_and_reverb,
            "num_evaluators": self.num_evaluators,
            "max_actor_steps": self.max_num_actor_steps,
            "snapshots": self.make_snapshot_models,
        }


def seed(a: Args) -> SeedProgram:
    """make_distributed_experiment, transcribed."""
    if a.multithreading_colocate_learner_and_reverb and a.num_learner_nodes > 1:
        raise ValueError("Replay and learner colocation is not yet supported ...")
    lp = SeedProgram()
    replay_node = lp.node("replay", "tables")
    replay = replay_node
    counter = lp.add(lp.node("counter", ""))
    if a.max_num_actor_steps is not None:
        limiter = lp.node("steps_limiter", "counter, max_steps", counter, a.max_num_actor_steps)
        lp.add(limiter, stops=True)
    learner_node = lp.node("learner", "random_key, replay, counter", KEY, replay, counter)
    learner = learner_node
    variable_sources = [learner]
    if a.multithreading_colocate_learner_and_reverb:
        lp.add(learner_node, replay_node)
    else:
        lp.add(replay_node)
        lp.add(learner_node)
    for k in range(1, a.num_learner_nodes):
        secondary = lp.node(
            f"secondary_learner/{k - 1}",
            "random_key, replay, counter, primary_learner",
            KEY,
            replay,
            primary_learner=learner,
        )
        variable_sources.append(lp.add(secondary))
    actor_keys = [KEY] * a.num_actors
    cycle = itertools.cycle(variable_sources)
    signature = "random_key, replay, variable_source, counter, actor_id"
    actor_nodes = [
        lp.node(f"actor/{aid}", signature, akey, replay, vsource, counter, aid)
        for aid, (akey, vsource) in enumerate(zip(actor_keys, cycle, strict=False))
    ]
    if a.num_actors_per_node == 1:
        for actor_node in actor_nodes:
            lp.add(actor_node)
    else:
        for i in range(0, a.num_actors, a.num_actors_per_node):
            lp.add(*actor_nodes[i : i + a.num_actors_per_node])
    for i in range(a.num_evaluators):
        signature = "random_key, variable_source, counter, make_actor"
        lp.add(lp.node(f"evaluator/{i}", signature, KEY, learner, counter, MAKE_ACTOR))
    checkpointing_config = True  # defaulted to CheckpointingConfig() when None
    if a.make_snapshot_models and checkpointing_config:
        lp.add(lp.node("model_saver", "variable_source", learner))
    return lp


SETTINGS = [
    Args(),
    Args(num_actors=7, num_actors_per_node=3),  # uneven last chunk
    Args(num_actors=5, num_actors_per_node=2, num_learner_nodes=3),
    Args(num_actors=8, num_actors_per_node=8, num_learner_nodes=2),
    Args(num_actors=3, num_actors_per_node=5),  # one process, fewer actors than per node
    Args(num_actors=1, num_learner_nodes=4),  # more learners than actors
    Args(num_actors=0, num_learner_nodes=2),
    Args(multithreading_colocate_learner_and_reverb=True, num_actors=6, num_actors_per_node=4),
    Args(max_num_actor_steps=1000, num_evaluators=0, make_snapshot_models=True),
    Args(max_num_actor_steps=0, num_evaluators=3, num_learner_nodes=2),
    Args(
        num_actors=10,
        num_actors_per_node=4,
        num_learner_nodes=3,
        num_evaluators=2,
        max_num_actor_steps=50,
        make_snapshot_models=True,
    ),
]


@pytest.mark.parametrize("args", SETTINGS, ids=str)
def test_acme_distributed_mirrors_the_seed(args: Args) -> None:
    assert_mirrors(compile_seed(PATH, args.params()), seed(args))


def test_acme_distributed_defaults_are_the_seeds() -> None:
    # The example's default max_actor_steps (50000) gives it a steps limiter: it stops by itself.
    assert_mirrors(compile_seed(PATH, {}), seed(Args(max_num_actor_steps=50_000)))


def test_secondary_learners_get_no_counter_and_follow_the_primary() -> None:
    program = compile_seed(PATH, {"num_learners": 3})
    for node in program.nodes_of("secondary_learner"):
        assert "counter" not in node.args
        assert {(e.arg, e.dst) for e in program.edges if e.src == node.id} == {
            ("replay", "replay"),
            ("primary_learner", "learner"),
        }


def test_colocating_learner_and_replay_with_secondaries_is_refused_at_its_line() -> None:
    args = Args(multithreading_colocate_learner_and_reverb=True, num_learner_nodes=2)
    with pytest.raises(ValueError, match="colocation is not yet supported"):
        seed(args)
    with pytest.raises(TopoError) as info:
        compile_seed(PATH, args.params())
    [d] = info.value.diagnostics
    assert "thread-colocated with replay" in d.message
    line = PATH.read_text().splitlines().index("  - name: learner_replay") + 1
    assert d.pos is not None and (d.pos.line, d.pos.col) == (line, 3)
