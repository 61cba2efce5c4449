"""The offline dataset: episodes a stated mix of policies actually played, on file.

Checks the mix by measuring each behaviour's episodes (counts and returns), that every
transition is what the environment did, and that the file round-trips."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topo.targets import prepare

ROOT = Path(__file__).resolve().parents[2]
assert prepare(str(ROOT / "examples/topologies/acme_offline.yaml"), "examples.agents") is None
demos: Any = importlib.import_module("examples.agents.demonstrations")
common: Any = importlib.import_module("examples.agents.common")


def test_the_dataset_holds_the_stated_mix_of_policies() -> None:
    data = demos.record_episodes(episodes=40, seed=5)
    assert [b.name for b in demos.MIX] == ["good", "mediocre", "random"]
    assert abs(sum(b.share for b in demos.MIX) - 1.0) < 1e-9
    returns = data.returns_by_policy()
    for behaviour in demos.MIX:  # exactly the stated share of episodes each
        assert len(returns[behaviour.name]) == round(behaviour.share * 40)
    # measured returns: the good policy balances the pole, the mediocre one about 200
    # steps, the random one about 20
    assert returns["good"].mean() >= 475
    assert 120 <= returns["mediocre"].mean() <= 300
    assert returns["random"].mean() <= 40
    # the mediocre policy plays most of the transitions
    steps = {n: float(r.sum()) for n, r in returns.items()}
    assert steps["mediocre"] > steps["good"] > steps["random"]
    # the episodes are shuffled, not in blocks
    assert len(set(data.episode_policy[:10].tolist())) > 1


def test_transitions_are_what_was_played() -> None:
    data = demos.record_episodes(episodes=6, seed=2)
    n = len(data)
    assert data.observation.shape == data.next_observation.shape == (n, 4)
    assert data.action.dtype == np.int32 and set(np.unique(data.action)) == {0, 1}
    assert np.all(data.reward == 1.0) and data.episode_return.sum() == n
    same_episode = data.episode[1:] == data.episode[:-1]
    # within an episode, each step starts where the last one ended
    assert np.array_equal(
        data.next_observation[:-1][same_episode], data.observation[1:][same_episode]
    )
    last = np.append(~same_episode, True)
    # discount 0 only where the pole fell or the cart left (a 500-step episode is cut: 1)
    assert np.all(data.discount[~last] == 1.0)
    for episode in np.flatnonzero(data.episode_return < 500):
        assert data.discount[last][episode] == 0.0
    # the good behaviour's episodes mostly play the expert's action (ε = 0.1: 95 %)
    good = np.isin(data.episode, np.flatnonzero(data.episode_policy == 0))
    expert = np.array([common.expert_action(o) for o in data.observation[good]])
    assert 0.9 < np.mean(expert == data.action[good]) < 0.99


def test_the_dataset_file_round_trips_and_the_factory_reads_it(tmp_path: Path) -> None:
    data = demos.record_episodes(episodes=5, seed=1)
    path = demos.write_episodes(data, tmp_path / "d" / "episodes.npz")
    back = demos.read_episodes(path)
    for field in demos.Episodes.__dataclass_fields__:
        assert np.array_equal(getattr(back, field), getattr(data, field)), field
    with np.load(path) as raw:
        assert raw["policies"].tolist() == ["good", "mediocre", "random"]
        assert "good: share" in str(raw["mix"])

    key = [0, 9]
    first = next(
        demos.transition_dataset(key, episodes=5, batch_size=16, path=str(tmp_path / "ds.npz"))
    )
    [written] = tmp_path.glob("ds-*.npz")
    assert sorted(first) == sorted(demos.BATCH_FIELDS) and first["observation"].shape == (16, 4)
    stamp = written.stat().st_mtime_ns
    again = next(
        demos.transition_dataset(key, episodes=5, batch_size=16, path=str(tmp_path / "ds.npz"))
    )
    assert written.stat().st_mtime_ns == stamp  # read back, not recorded again
    assert all(np.array_equal(first[k], again[k]) for k in first)
    other = next(demos.transition_dataset([0, 10], episodes=5, batch_size=16))
    assert not np.array_equal(other["observation"], first["observation"])


def test_in_the_fragments_mix_the_top_episodes_by_return_hold_no_expert_play() -> None:
    data = demos.record_episodes(episodes=100, seed=7, mix="fragments")
    assert [b.name for b in demos.FRAGMENTS] == ["good", "mediocre", "random"]
    returns = data.returns_by_policy("fragments")
    for behaviour in demos.FRAGMENTS:
        assert len(returns[behaviour.name]) == round(behaviour.share * 100)
    # the expert's play is there, a fifth of the transitions or so, in 30-150-step windows
    played = data.transitions_by_policy("fragments")
    assert sum(played.values()) == len(data)
    assert 0.15 * len(data) < played["good"] < 0.3 * len(data)
    assert 30 <= returns["good"].min() and returns["good"].max() <= 150
    # while the mediocre controller's whole episodes score more (about 190)
    assert returns["mediocre"].mean() > 1.5 * returns["good"].mean()
    # so the top 20 % of the episodes by return hold none of the expert's transitions,
    top = np.argsort(data.episode_return)[-20:]
    assert not np.any(data.episode_policy[top] == 0)
    # nor do the top 20 % of the transitions by their episode's return (filtered BC's rule)
    per_step = data.episode_return[data.episode]
    kept = per_step >= np.quantile(per_step, 0.8)
    assert kept.sum() > 0 and not np.any(data.episode_policy[data.episode][kept] == 0)
    # a window ends by truncation: discount 1 (TD bootstraps through it); the expert's
    # play is what the expert does (ε = 0.1)
    good = data.episode_policy[data.episode] == 0
    assert np.all(data.discount[good] == 1.0)
    expert = np.array([common.expert_action(o) for o in data.observation[good]])
    assert 0.9 < np.mean(expert == data.action[good]) < 0.99
    same_episode = data.episode[1:] == data.episode[:-1]
    assert np.array_equal(
        data.next_observation[:-1][same_episode], data.observation[1:][same_episode]
    )


def test_the_mix_is_a_parameter_of_the_factory_and_of_its_file(tmp_path: Path) -> None:
    path = str(tmp_path / "ds.npz")
    first = next(demos.transition_dataset([0, 3], episodes=10, batch_size=8, path=path))
    [written] = tmp_path.glob("ds-*.npz")
    with np.load(written) as raw:
        assert str(raw["mix"]) == demos.describe() == demos.describe("default")
    # the same file asked for another mix is recorded again with that mix
    second = next(
        demos.transition_dataset([0, 3], episodes=10, batch_size=8, path=path, mix="fragments")
    )
    with np.load(written) as raw:
        assert "logged in windows of 30-150 steps" in str(raw["mix"])
    assert not np.array_equal(first["observation"], second["observation"])
    with pytest.raises(ValueError, match="unknown dataset mix 'nope'"):
        demos.record_episodes(episodes=3, mix="nope")
