"""The DQN evaluator at the stop: the final evaluation is bounded in time, and a stop cuts
an evaluation under way short, so the evaluator ends well inside the grace period."""

from __future__ import annotations

import importlib.util
import threading
import time
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)


def _evaluator(episodes: int, final_within_s: float = 1.0) -> Any:
    """An evaluator outside a program, holding a fresh network's parameters; its variable
    source is gone (None), as a stopped learner is, so ``final`` uses those."""
    from examples.agents.dqn_core import initial_state, make_network, make_optimizer
    from examples.agents.dqn_eval import Evaluator

    network = make_network((64, 64))
    state = initial_state(network, make_optimizer(1e-3), 0)
    evaluator = Evaluator(0, None, None, episodes=episodes, final_within_s=final_within_s)
    evaluator._params = state.params
    return evaluator


def test_the_final_evaluation_plays_what_fits_in_its_time(capsys: pytest.CaptureFixture) -> None:
    evaluator = _evaluator(episodes=100_000, final_within_s=0.3)
    start = time.monotonic()
    mean = evaluator.final()
    took = time.monotonic() - start
    assert took < 1.5, f"the final evaluation took {took:.2f}s"
    out = capsys.readouterr().out
    assert f"final evaluation return: {mean:.1f} (mean of " in out
    played = int(out.split("(mean of ")[1].split()[0])
    assert 1 <= played < 100_000


def test_a_stop_cuts_an_evaluation_under_way_after_one_episode() -> None:
    evaluator = _evaluator(episodes=50)
    stop = threading.Event()
    stop.set()
    evaluator.evaluate(evaluator._params, stop=stop)
    assert evaluator._played == 1
    evaluator.evaluate(evaluator._params)
    assert evaluator._played == 50


def test_a_fixed_eval_seed_plays_the_same_held_out_episodes_at_every_evaluation(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import examples.agents.dqn_eval as dqn_eval

    played: list[int] = []
    monkeypatch.setattr(
        dqn_eval, "run_episode", lambda env, policy, seed: played.append(seed) or 0.0
    )
    fixed = _evaluator(episodes=3)
    fixed._eval_seed = 1_000_000
    for _ in range(2):
        fixed.evaluate(fixed._params)
        fixed.returns.append(0.0)
    assert played == [1_000_000, 1_000_001, 1_000_002] * 2
    played.clear()
    own = _evaluator(episodes=3)  # no eval_seed: each evaluation its own episodes
    for _ in range(2):
        own.evaluate(own._params)
        own.returns.append(0.0)
    assert played[:3] != played[3:] and len(set(played)) == 6
