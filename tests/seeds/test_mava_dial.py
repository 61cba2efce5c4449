"""mava_dial.yaml builds Mava's DIAL system program (build)."""

from __future__ import annotations

import itertools

import pytest
from seed_support import EXAMPLES, SeedProgram, assert_mirrors, compile_seed

PATH = EXAMPLES / "mava_dial.yaml"


def seed(
    num_executors: int, num_caches: int, checkpoint: bool, max_executor_steps: int | None
) -> SeedProgram:
    """DIAL build(), transcribed: counter=None without checkpoint, executor_id % len(sources)."""
    lp = SeedProgram()
    counter = None
    replay = lp.add(lp.node("replay", "tables"))
    if checkpoint:
        counter = lp.add(lp.node("counter", ""))
    if max_executor_steps:
        lp.add(lp.node("coordinator", "counter", counter), stops=True)
    trainer = lp.add(lp.node("trainer", "replay, counter", replay, counter))
    signature = "variable_source, counter, trainer"
    lp.add(lp.node("evaluator", signature, trainer, counter, trainer))
    if not num_caches:
        sources = [trainer]
    else:
        sources = []
        for k in range(num_caches):
            cacher = lp.add(
                lp.node(f"cacher/{k}", "source, refresh_ms, stale_ms", trainer, 2000, 4000)
            )
            sources.append(cacher)
    for executor_id in range(num_executors):
        source = sources[executor_id % len(sources)]
        signature = "executor_id, replay, variable_source, counter, trainer"
        lp.add(
            lp.node(
                f"executor/{executor_id}", signature, executor_id, replay, source, counter, trainer
            )
        )
    return lp


@pytest.mark.parametrize(
    ("num_executors", "num_caches", "checkpoint", "max_executor_steps"),
    [
        (n, c, ck, m)
        for n, c, ck, m in itertools.product([1, 5], [0, 1, 2, 3], [True, False], [None, 0, 100])
    ],
)
def test_mava_dial_mirrors_the_seed(
    num_executors: int, num_caches: int, checkpoint: bool, max_executor_steps: int | None
) -> None:
    params = {
        "num_executors": num_executors,
        "num_caches": num_caches,
        "checkpoint": checkpoint,
        "max_executor_steps": max_executor_steps,
    }
    program = compile_seed(PATH, params)
    assert_mirrors(program, seed(num_executors, num_caches, checkpoint, max_executor_steps))


def test_mava_without_caches_falls_back_to_the_trainer() -> None:
    program = compile_seed(PATH, {"num_caches": 0, "num_executors": 3})
    vias = {e.via for e in program.edges if e.arg == "variable_source" and e.src != "evaluator"}
    assert vias == {"fallback"}


def test_mava_defaults() -> None:
    assert_mirrors(compile_seed(PATH, {}), seed(2, 1, True, 100_000))
