"""What shows that an example learned, read from its logs and metrics: for DQN the budget
the learning tests give it, its evaluations, and the bound the best of them must reach;
for offline DQN and DIAL the budgets and bounds of theirs. Shared by the learning tests
of every backend."""

from __future__ import annotations

import json
import re
from pathlib import Path

RANDOM_RETURN = 22.0  # a uniformly random policy's mean CartPole-v1 return
BEST_AT_LEAST = 100.0  # the best evaluation within SMALL's budget (see assert_learned)
FINAL = re.compile(r"final evaluation return: (-?[0-9.]+)")
PERIODIC = re.compile(r"mean return over \d+ episodes: (-?[0-9.]+)")
SMALL = {  # a budget that learns in well under a minute of training on 2 cores
    "max_actor_steps": 25_000,
    "samples_per_insert": 16.0,
    "min_replay_size": 500,
    "eval_every_s": 5.0,
    # The run ends by itself at the first evaluation that shows it learned (the steps
    # limiter ends one that did not, and assert_learned fails it).
    "stop_at_return": BEST_AT_LEAST,
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
    more than four times a random policy's. A bug it catches, tried: the learner's TD
    target not masking the episodes' ends (a classic DQN bug) kept the best evaluation
    at 62.8 over the whole budget (distributed, threads)."""
    returns = evaluations(log)
    assert max(returns) >= BEST_AT_LEAST, (returns, log[-2000:])
    return returns


OFFLINE = {  # acme_offline: filtered BC learns the good policy of the recorded data
    "max_learner_steps": 1000,
    "dataset_episodes": 20,
    "eval_every_s": 1.0,
}
OFFLINE_FINAL = re.compile(r"final evaluation at learner_steps \d+: mean return ([\d.]+)")


def assert_offline_learned(evaluator_log: str) -> float:
    """The offline learner's one final evaluation; AssertionError unless it plays the
    good policy of the data (its return 500) nearly: over 400, five random policies'."""
    final = OFFLINE_FINAL.findall(evaluator_log)
    assert len(final) == 1, evaluator_log[-2000:]
    assert float(final[0]) > 400.0 > 5 * RANDOM_RETURN, evaluator_log[-2000:]
    return float(final[0])


DIAL_BEST_AT_LEAST = 0.05  # see assert_dial_learned
# mava_dial: at most ~150 trainer updates; the run ends at the first evaluation that shows
# it learned (its final one), or at the steps limit (assert_dial_learned then judges it).
DIAL = {"max_executor_steps": 20_000, "stop_at_reward": 0.1}
DIAL_REWARD = re.compile(r"final normalised reward: (-?[\d.]+)")
DIAL_ANY_REWARD = re.compile(r"normalised reward: (-?[\d.]+) after")


def assert_dial_learned(evaluator_log: str, metrics: Path) -> float:
    """DIAL's final greedy reward; AssertionError unless it beats never telling (0; an
    untrained network tells on day 1, about -1, or never), its best evaluation reaches
    DIAL_BEST_AT_LEAST, and the trainer took batches along (at least 15 steps: the
    run stops as soon as it learned, after 19-37 trainer steps beside busy loops, about
    100 on an idle machine). Run to the whole budget, the best evaluation reached 0.46-0.73
    (three seeds on procs) but the final one was twice below 0 in fresh-clone suites
    (-0.028, -0.039: a policy that had learned and lost it again in the last updates),
    and the best 0.061 once on Slurm; so the run stops at the first evaluation that
    reaches DIAL["stop_at_reward"], and that one is the final. What shows the learned
    communication (1.000 against the best rule without it, 0.722) takes ten times the
    budget: bench/dial_bench.py."""
    found = DIAL_REWARD.findall(evaluator_log)
    assert found, evaluator_log[-2000:]
    assert float(found[-1]) > 0.0, found
    every = [float(r) for r in DIAL_ANY_REWARD.findall(evaluator_log)]
    assert max(every) >= DIAL_BEST_AT_LEAST, every
    rows = [json.loads(line) for line in (metrics / "trainer.jsonl").read_text().splitlines()]
    assert max(int(r["trainer_steps"]) for r in rows) >= 15, rows[-3:]
    return float(found[-1])
