"""consumer_producers.yaml builds Launchpad's consumer_producers program (make_program)."""

from __future__ import annotations

import pytest
from seed_support import EXAMPLES, SeedProgram, assert_mirrors, compile_seed

PATH = EXAMPLES / "consumer_producers.yaml"


def seed(num_producers: int) -> SeedProgram:
    """make_program(num_producers), transcribed."""
    lp = SeedProgram()
    producers = [lp.add(lp.node(f"producer/{i}", "")) for i in range(num_producers)]
    node = lp.node("consumer", "producers, stop_fn", producers=producers)
    lp.add(node, stops=True)  # stop_fn=lp.make_program_stopper(...)
    return lp


@pytest.mark.parametrize("num_producers", [1, 3, 4, 7])
def test_consumer_producers_mirrors_the_seed(num_producers: int) -> None:
    program = compile_seed(PATH, {"num_producers": num_producers})
    assert_mirrors(program, seed(num_producers))


def test_consumer_producers_default_is_four_producers() -> None:
    assert_mirrors(compile_seed(PATH, {}), seed(4))
