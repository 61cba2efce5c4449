"""The offline agent's learner, run in-process: its step on a fixed batch (behaviour
cloning and CRR), its variables and checkpoints, its snapshots and its import."""

from __future__ import annotations

import importlib
import itertools
import pickle
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topo.targets import TargetError, prepare

ROOT = Path(__file__).resolve().parents[2]
PATH = ROOT / "examples" / "topologies" / "acme_offline.yaml"
assert prepare(str(PATH), "examples.agents.offline") is None  # haiku ships an `examples` too
offline: Any = importlib.import_module("examples.agents.offline")
common: Any = importlib.import_module("examples.agents.common")
demos_mod: Any = importlib.import_module("examples.agents.demonstrations")


def fixed_batch(size: int = 256) -> dict[str, np.ndarray]:
    """``size`` transitions drawn from five recorded episodes of the mix."""
    data = demos_mod.record_episodes(episodes=5, seed=3)
    batch = next(demos_mod.batches(data, size, 0))
    return batch


def fixed_learner(seed: int, batch: dict[str, np.ndarray], algorithm: str = "bc") -> Any:
    """A learner whose dataset factory repeats ``batch`` forever; a log row every step."""
    return offline.Learner(
        [0, seed],
        dataset=lambda key, **_: itertools.repeat(batch),
        algorithm=algorithm,
        log_every_s=0.0,
    )


def policy_params(learner: Any) -> list[np.ndarray]:
    [params] = learner.get_variables(["policy"])
    return [params[m][n] for m in sorted(params) for n in sorted(params[m])]


@pytest.mark.parametrize("algorithm", ["bc", "filtered_bc", "crr"])
def test_learner_step_on_a_fixed_batch_lowers_the_loss(algorithm: str) -> None:
    batch = fixed_batch()
    learner = fixed_learner(0, batch, algorithm)
    before = policy_params(learner)
    rows = [learner.step() for _ in range(30)]
    losses = [row["loss"] for row in rows]
    assert losses[-1] < 0.8 * losses[0], losses
    assert rows[-1]["learner_steps"] == learner.steps == 30
    assert rows[-1]["steps_per_s"] > 0
    after = policy_params(learner)
    assert all(a.shape == b.shape for a, b in zip(before, after, strict=True))
    assert not any(np.array_equal(a, b) for a, b in zip(before, after, strict=True))


@pytest.mark.slow
@pytest.mark.parametrize("algorithm", ["bc", "filtered_bc", "crr"])
def test_get_variables_save_restore_round_trip(algorithm: str) -> None:
    batch = fixed_batch()
    trained = fixed_learner(0, batch, algorithm)
    trained.run(num_steps=25)
    assert trained.steps == 25
    a, b = trained.get_variables(["policy", "policy"])
    assert a is b and set(a) == {"mlp/~/linear_0", "mlp/~/linear_1", "mlp/~/linear_2"}
    with pytest.raises(KeyError, match="policy"):
        trained.get_variables(["critic"])

    state = pickle.loads(pickle.dumps(trained.save()))  # a checkpoint travels over RPC
    fresh = fixed_learner(1, batch, algorithm)
    assert not np.array_equal(policy_params(fresh)[0], policy_params(trained)[0])
    fresh.restore(state)
    assert fresh.steps == 25
    for x, y in zip(policy_params(fresh), policy_params(trained), strict=True):
        assert np.array_equal(x, y)
    # the optimizer state (and CRR's critics) came back too: the next step is the same
    trained.step()
    fresh.step()
    for x, y in zip(policy_params(fresh), policy_params(trained), strict=True):
        np.testing.assert_allclose(x, y, rtol=1e-6, atol=1e-7)


def test_greedy_policy_and_snapshots_agree_with_the_network(tmp_path: Path) -> None:
    learner = fixed_learner(0, fixed_batch())
    learner.run(num_steps=5)
    [params] = learner.get_variables(["policy"])
    path = offline.save_snapshot(params, tmp_path / "snap" / "policy.npz")
    loaded = offline.load_snapshot(path)
    assert {m: set(d) for m, d in loaded.items()} == {m: set(d) for m, d in params.items()}
    observations = demos_mod.record_episodes(episodes=3, seed=0).observation
    network = offline.make_network((64, 64))
    expected = np.asarray(network.apply(params, observations)).argmax(axis=-1)
    policy = offline.greedy_policy(loaded)
    assert [policy(o) for o in observations] == expected.tolist()


def test_importing_the_agent_runs_no_jax() -> None:
    """The procs backend forks nodes from a process that imported the targets: the import
    must leave JAX uninitialised and start no thread (forking after JAX has run is unsafe)."""
    code = (
        "import threading, examples.agents.offline\n"
        "from jax._src import xla_bridge\n"
        "print(xla_bridge.backends_are_initialized(), threading.active_count())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "1"]


def test_a_dataset_factory_that_does_not_import_is_named() -> None:
    with pytest.raises(TargetError, match=r"cannot import 'examples\.agents\.nope:factory'"):
        offline.Learner([0, 0], dataset="examples.agents.nope:factory")


def test_an_unknown_learner_is_named() -> None:
    with pytest.raises(
        ValueError, match=r"unknown offline learner 'cql'.*\['bc', 'crr', 'filtered_bc'\]"
    ):
        fixed_learner(0, fixed_batch(), "cql")
    with pytest.raises(ValueError, match="this checkpoint is of another learner"):
        fixed_learner(0, fixed_batch(), "crr").restore(fixed_learner(0, fixed_batch()).save())


@pytest.mark.slow
def test_at_the_stop_the_learner_hands_its_final_parameters_to_one_more_fetch() -> None:
    """The evaluator's final evaluation plays the learner's final parameters: at the stop
    a learner that has served parameters waits (bounded) for one more fetch, and ends as
    soon as it has had it."""
    batch = fixed_batch()
    learner = fixed_learner(0, batch)
    policy_params(learner)  # a variable client follows this learner
    learner._stop.set()
    started = time.monotonic()
    learner.run()  # nobody fetches: it waits out the bound, then ends
    waited = time.monotonic() - started
    assert offline.FINAL_FETCH_WAIT_S <= waited < offline.FINAL_FETCH_WAIT_S + 5

    fetched: list[list[np.ndarray]] = []
    fetcher = threading.Timer(0.2, lambda: fetched.append(policy_params(learner)))
    started = time.monotonic()
    fetcher.start()
    learner.run()  # ends as soon as the final fetch is served
    assert time.monotonic() - started < offline.FINAL_FETCH_WAIT_S
    fetcher.join()
    assert fetched

    quiet = fixed_learner(1, batch)  # never fetched from: nothing to wait for
    quiet._stop.set()
    started = time.monotonic()
    quiet.run()
    assert time.monotonic() - started < offline.FINAL_FETCH_WAIT_S


def test_the_final_evaluation_plays_what_fits_in_its_time() -> None:
    """At the stop the evaluator's last round is bounded (at least one episode): it must
    end inside the stop's grace period however many episodes a round has."""
    learner = fixed_learner(0, fixed_batch())
    evaluator = offline.Evaluator([0, 1], learner, None, episodes=100_000, final_within_s=0.2)
    evaluator._client.params = learner.get_variables(["policy"])[0]
    row = evaluator.evaluate(final=True)
    assert row is not None and row["final"]
    assert 1 <= row["episodes"] < 100_000
    few = offline.Evaluator([0, 1], learner, None, episodes=3, final_within_s=0.0)
    few._client.params = evaluator._client.params
    assert few.evaluate(final=False)["episodes"] == 3  # a periodic round plays them all
