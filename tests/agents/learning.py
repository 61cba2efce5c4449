"""What shows that a DQN example learned, read from its evaluator's log: the budget the
learning tests give it, its evaluations, and the bound the best of them must reach."""

from __future__ import annotations

import re

RANDOM_RETURN = 22.0  # a uniformly random policy's mean CartPole-v1 return
BEST_AT_LEAST = 100.0  # the best evaluation within SMALL's budget (see assert_learned)
FINAL = re.compile(r"final evaluation return: ([0-9.]+)")
PERIODIC = re.compile(r"mean return over \d+ episodes: ([0-9.]+)")
SMALL = {  # a budget that learns in well under a minute of training on 2 cores
    "max_actor_steps": 25_000,
    "samples_per_insert": 16.0,
    "min_replay_size": 500,
    "eval_every_s": 5.0,
}


def evaluations(log: str) -> list[float]:
    """The evaluator's returns in the order it gave them, its one final evaluation last
    (AssertionError, with the log's end, when it gave no final one or more than one)."""
    final = FINAL.findall(log)
    assert len(final) == 1, log[-2000:]
    return [float(r) for r in PERIODIC.findall(log) + final]


def assert_learned(log: str) -> list[float]:
    """The evaluations of ``log``; AssertionError unless the best reaches BEST_AT_LEAST.

    DQN's return on CartPole dips now and then while it learns: the best evaluation, not
    the last one, is what shows reliably that it learned. Within SMALL's budget, with two
    busy loops beside it on a loaded 2-core machine, the best evaluation reached 279
    (distributed) and 183 (colocated) on procs; 100 leaves a margin below both, and is
    more than four times a random policy's."""
    returns = evaluations(log)
    assert max(returns) >= BEST_AT_LEAST, (returns, log[-2000:])
    return returns
