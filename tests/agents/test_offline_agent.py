"""The offline (behaviour cloning) agent's pieces, run in-process: the demonstration
dataset factory, the learner's step on a fixed batch, its variables and checkpoints."""

from __future__ import annotations

import importlib
import itertools
import pickle
import subprocess
import sys
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
    """``size`` expert-labelled transitions from two noisy demonstration episodes."""
    demos = demos_mod.make_demonstrations(episodes=2, seed=3, noise=0.3)
    return {"observation": demos.observation[:size], "action": demos.action[:size]}


def fixed_learner(seed: int, batch: dict[str, np.ndarray]) -> Any:
    """A learner whose dataset factory repeats ``batch`` forever; a log row every step."""
    return offline.Learner(
        [0, seed], dataset=lambda key, **_: itertools.repeat(batch), log_every_s=0.0
    )


def policy_params(learner: Any) -> list[np.ndarray]:
    [params] = learner.get_variables(["policy"])
    return [params[m][n] for m in sorted(params) for n in sorted(params[m])]


def test_demonstrations_are_expert_labelled_noisy_play_and_seeded() -> None:
    demos = demos_mod.make_demonstrations(episodes=3, seed=7, noise=0.3)
    n = len(demos)
    assert demos.observation.shape == (n, 4) and demos.observation.dtype == np.float32
    assert demos.action.shape == demos.taken.shape == (n,) and demos.action.dtype == np.int32
    assert demos.episode_returns.shape == (3,) and demos.episode_returns.sum() == n  # 1 per step
    assert n > 600  # the noisy demonstrator still balances the pole for long episodes
    labels = [common.expert_action(o) for o in demos.observation]
    assert demos.action.tolist() == labels  # the label is always the expert's action
    off_expert = float(np.mean(demos.taken != demos.action))
    assert 0.05 < off_expert < 0.25  # noise 0.3: a random action differs half the time

    again = demos_mod.make_demonstrations(episodes=3, seed=7, noise=0.3)
    assert np.array_equal(again.observation, demos.observation)
    assert np.array_equal(again.taken, demos.taken)
    other = demos_mod.make_demonstrations(episodes=3, seed=8, noise=0.3)
    assert not np.array_equal(other.observation[:50], demos.observation[:50])
    clean = demos_mod.make_demonstrations(episodes=1, seed=7, noise=0.0)
    assert np.array_equal(clean.taken, clean.action)
    with pytest.raises(ValueError, match="episodes"):
        demos_mod.make_demonstrations(episodes=0)


def test_dataset_factory_yields_batches_seeded_by_the_key() -> None:
    def first(key: list[int]) -> dict[str, np.ndarray]:
        return next(demos_mod.demonstration_dataset(key, episodes=2, noise=0.3, batch_size=32))

    batch = first([0, 1])
    assert batch["observation"].shape == (32, 4) and batch["action"].shape == (32,)
    assert set(np.unique(batch["action"])) <= {0, 1}
    assert all(np.array_equal(batch[k], first([0, 1])[k]) for k in batch)
    assert not np.array_equal(batch["observation"], first([0, 2])["observation"])


def test_learner_step_on_a_fixed_batch_lowers_the_loss() -> None:
    batch = fixed_batch()
    learner = fixed_learner(0, batch)
    before = policy_params(learner)
    rows = [learner.step() for _ in range(30)]
    losses = [row["loss"] for row in rows]
    assert losses[-1] < 0.8 * losses[0], losses
    assert rows[-1]["learner_steps"] == learner.steps == 30
    assert rows[-1]["steps_per_s"] > 0 and 0.0 <= rows[-1]["accuracy"] <= 1.0
    after = policy_params(learner)
    assert all(a.shape == b.shape for a, b in zip(before, after, strict=True))
    assert not any(np.array_equal(a, b) for a, b in zip(before, after, strict=True))


def test_get_variables_save_restore_round_trip() -> None:
    batch = fixed_batch()
    trained = fixed_learner(0, batch)
    trained.run(num_steps=25)
    assert trained.steps == 25
    a, b = trained.get_variables(["policy", "policy"])
    assert a is b and set(a) == {"mlp/~/linear_0", "mlp/~/linear_1", "mlp/~/linear_2"}
    with pytest.raises(KeyError, match="policy"):
        trained.get_variables(["critic"])

    state = pickle.loads(pickle.dumps(trained.save()))  # a checkpoint travels over RPC
    fresh = fixed_learner(1, batch)
    assert not np.array_equal(policy_params(fresh)[0], policy_params(trained)[0])
    fresh.restore(state)
    assert fresh.steps == 25
    for x, y in zip(policy_params(fresh), policy_params(trained), strict=True):
        assert np.array_equal(x, y)
    # the optimizer state came back too: the next step is the same on both
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
    observations = demos_mod.make_demonstrations(episodes=1, seed=0, noise=0.5).observation
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
