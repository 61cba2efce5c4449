"""The offline CartPole dataset: episodes a mix of behaviour policies played, on file.

As in Acme's offline agents (which read RLDS/TFDS episode datasets and turn them into
transitions), the data is what was actually played: each step's observation, the action
taken, its reward and discount and the next observation. The episodes come from three
behaviour policies in stated proportions (``MIX``, by episodes):

- ``good`` (10 %): the scripted expert (``common.expert_action``), ε-greedy with ε = 0.1;
  it balances the pole for the full 500 steps.
- ``mediocre`` (60 %): a weaker controller that pushes towards the pole's angular
  velocity only (it ignores the angle and the cart), ε-greedy with ε = 0.1; about 190.
- ``random`` (30 %): uniformly random actions; about 22.

By transitions (100 episodes, seeds 0-4) that is about 29 % good, 67 % mediocre, 4 %
random.

Why a different mediocre controller rather than the expert with more noise: greedy
behaviour cloning of ε-greedy copies of one policy recovers that policy exactly (its
action is the majority everywhere), so the data would not need offline RL. Here the
mediocre controller plays most of the transitions and disagrees with the expert, so
cloning the data falls short of the best policy in it; a learner that weighs actions by
their value can do better. In this mix, though, the best episodes are all the expert's:
keeping the top episodes by return (filtered BC) finds the best policy by construction.

The second mix, ``FRAGMENTS`` (``mix="fragments"``), is one where the returns mislead:

- ``good`` (30 % of the logged episodes): the same ε-greedy expert, but each of its
  episodes is logged only in one window of 30-150 consecutive steps (length and start
  uniform), as if the logger had caught pieces of it. A window ends by truncation, not
  by a fall: its last step has discount 1, so TD methods bootstrap through it. Its
  logged return is the window's length: 30-150, about 88 on average.
- ``mediocre`` (50 %): the mediocre controller's whole episodes, about 180 (highest
  280-450).
- ``random`` (20 %): about 22.

Measured (100 episodes, seeds 0-4): the expert plays about 21 % of the transitions, the
mediocre controller 75 %, random 4 %. No expert window reaches the 20th-highest
episode return (about 175-190), so the top 20 % of the episodes by return, and the top
20 % of the transitions by their episode's return (filtered BC's rule), hold none of the
expert's play: filtered BC clones the mediocre controller. The expert's play is in the
data all the same, and the expert played in full scores 500: a learner that values
actions from the transitions (CRR's critic) can find that the expert's actions are the
better ones (bench/results/offline_bench.md).

``transition_dataset(random_key, ...)`` is the default dataset factory of
``examples/topologies/acme_offline.yaml`` (Acme's ``demonstration_dataset_factory``): it
writes the episodes to an ``.npz`` file once (``write_episodes``), reads them back
(``read_episodes``) and draws uniform minibatches of transitions from them; its ``mix``
argument picks ``"default"`` (what the topology passes, by default) or ``"fragments"``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from examples.agents.common import expert_action, make_environment

Batch = dict[str, np.ndarray]
NUM_ACTIONS = 2
FIELDS = ("observation", "action", "reward", "discount", "next_observation")
BATCH_FIELDS = (*FIELDS, "episode_return")  # each transition's episode's return


def mediocre_action(observation: np.ndarray) -> int:
    """A weaker CartPole controller: push towards where the pole is turning, ignoring the
    pole's angle and the cart (about 200 steps before the pole or the cart goes out)."""
    return int(float(observation[3]) > 0.0)


@dataclass(frozen=True)
class Behaviour:
    """One behaviour policy of the mix: ``share`` of the episodes are played by ``base``
    acting uniformly at random with probability ``epsilon``. With ``fragment = (lo, hi)``
    each of its episodes is logged only in part: one window of ``lo``-``hi`` consecutive
    steps (its length uniform, its start uniform in the episode), the rest not recorded;
    the window is a logged episode of its own (its return the window's rewards)."""

    name: str
    base: Callable[[np.ndarray], int] | None  # None: always random
    epsilon: float
    share: float
    fragment: tuple[int, int] | None = None  # None: the whole episode is logged


MIX: tuple[Behaviour, ...] = (
    Behaviour("good", expert_action, 0.1, 0.1),
    Behaviour("mediocre", mediocre_action, 0.1, 0.6),
    Behaviour("random", None, 1.0, 0.3),
)

# The expert logged in fragments: its returns mislead (see the module docstring).
FRAGMENTS: tuple[Behaviour, ...] = (
    Behaviour("good", expert_action, 0.1, 0.3, fragment=(30, 150)),
    Behaviour("mediocre", mediocre_action, 0.1, 0.5),
    Behaviour("random", None, 1.0, 0.2),
)
MIXES: dict[str, tuple[Behaviour, ...]] = {"default": MIX, "fragments": FRAGMENTS}
Mix = str | Sequence[Behaviour]  # a name in MIXES, or the behaviours themselves


def resolve_mix(mix: Mix) -> tuple[Behaviour, ...]:
    """The behaviours of ``mix``: a name in ``MIXES`` (``"default"``, ``"fragments"``) or
    a sequence of ``Behaviour``."""
    if isinstance(mix, str):
        if mix not in MIXES:
            raise ValueError(f"unknown dataset mix {mix!r}: choose one of {sorted(MIXES)}")
        return MIXES[mix]
    return tuple(mix)


@dataclass(frozen=True)
class Episodes:
    """Steps of recorded episodes, flat (one row per transition), with per-episode data:
    which behaviour (index into ``MIX``) played each episode and its return."""

    observation: np.ndarray  # (N, 4) float32
    action: np.ndarray  # (N,) int32: the action actually played
    reward: np.ndarray  # (N,) float32
    discount: np.ndarray  # (N,) float32: 0 when the pole fell or the cart left, else 1
    next_observation: np.ndarray  # (N, 4) float32
    episode: np.ndarray  # (N,) int32: the episode each step belongs to
    episode_policy: np.ndarray  # (episodes,) int32: index into MIX
    episode_return: np.ndarray  # (episodes,) float64

    def __len__(self) -> int:
        return int(self.action.shape[0])

    @classmethod
    def from_steps(
        cls, steps: Mapping[str, Sequence[Any]], who: Sequence[int], returns: Sequence[float]
    ) -> Episodes:
        """The episodes from per-step lists (``FIELDS`` and ``episode``), which behaviour
        played each episode and each episode's return, in their dtypes."""
        floats = {k: np.asarray(steps[k], np.float32) for k in FIELDS if k != "action"}
        return cls(
            **floats,
            action=np.asarray(steps["action"], np.int32),
            episode=np.asarray(steps["episode"], np.int32),
            episode_policy=np.asarray(who, np.int32),
            episode_return=np.asarray(returns, np.float64),
        )

    def returns_by_policy(self, mix: Mix = MIX) -> dict[str, np.ndarray]:
        """Each behaviour's (logged) episode returns, by name."""
        behaviours = resolve_mix(mix)
        return {
            b.name: self.episode_return[self.episode_policy == i] for i, b in enumerate(behaviours)
        }

    def transitions_by_policy(self, mix: Mix = MIX) -> dict[str, int]:
        """How many transitions each behaviour played, by name."""
        played = self.episode_policy[self.episode]
        return {b.name: int(np.sum(played == i)) for i, b in enumerate(resolve_mix(mix))}


def assign_policies(episodes: int, mix: Sequence[Behaviour], rng: np.random.Generator) -> Any:
    """Which behaviour plays each episode: exactly ``round(share * episodes)`` each (the
    last takes the remainder), in shuffled order."""
    counts = [round(b.share * episodes) for b in mix[:-1]]
    counts.append(episodes - sum(counts))
    if min(counts) < 0:
        raise ValueError(f"the mix's shares must sum to 1, got {[b.share for b in mix]}")
    order = np.repeat(np.arange(len(mix), dtype=np.int32), counts)
    rng.shuffle(order)
    return order


def record_episodes(episodes: int = 100, seed: int = 0, mix: Mix = MIX) -> Episodes:
    """Play ``episodes`` CartPole episodes with the behaviours of ``mix`` (a name in
    ``MIXES`` or the behaviours) in their shares, recording every step as played (of a
    ``fragment`` behaviour's episode, only one window of it)."""
    if episodes < 1:
        raise ValueError(f"episodes must be ≥ 1, got {episodes}")
    behaviours = resolve_mix(mix)
    rng = np.random.default_rng(seed)
    env = make_environment(seed)
    steps: dict[str, list[Any]] = {k: [] for k in (*FIELDS, "episode")}
    who = assign_policies(episodes, behaviours, rng)
    returns = []
    for index, behaviour in enumerate(behaviours[i] for i in who):
        observation, _ = env.reset(seed=int(rng.integers(2**31)))
        played: list[tuple[Any, ...]] = []
        while True:
            base = behaviour.base
            if base is None or rng.random() < behaviour.epsilon:
                action = int(rng.integers(NUM_ACTIONS))
            else:
                action = base(observation)
            next_observation, reward, terminated, truncated, _ = env.step(action)
            discount = 0.0 if terminated else 1.0
            played.append((observation, action, reward, discount, next_observation))
            observation = next_observation
            if terminated or truncated:
                break
        if behaviour.fragment is not None:  # log one window of the episode only
            low, high = behaviour.fragment
            length = min(int(rng.integers(low, high + 1)), len(played))
            start = int(rng.integers(0, len(played) - length + 1))
            played = played[start : start + length]
        for step in played:
            for key, value in zip((*FIELDS, "episode"), (*step, index), strict=True):
                steps[key].append(value)
        returns.append(float(sum(float(step[2]) for step in played)))
    env.close()
    return Episodes.from_steps(steps, who, returns)


def describe(mix: Mix = MIX) -> str:
    """The mix in words, stored with the file so a reader knows what played the data."""

    def one(b: Behaviour) -> str:
        text = f"{b.name}: share {b.share:g}, epsilon {b.epsilon:g}"
        if b.fragment is not None:
            text += f", logged in windows of {b.fragment[0]}-{b.fragment[1]} steps"
        return text

    return "; ".join(one(b) for b in resolve_mix(mix))


def write_episodes(data: Episodes, path: str | Path, mix: Mix = MIX) -> Path:
    """Write ``data`` to an ``.npz`` file at ``path`` (atomically), with the mix's names
    and description."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp.npz")
    arrays = {k: getattr(data, k) for k in Episodes.__dataclass_fields__}
    names = np.asarray([b.name for b in resolve_mix(mix)])
    np.savez(tmp, policies=names, mix=describe(mix), **arrays)
    os.replace(tmp, path)
    return path


def read_episodes(path: str | Path) -> Episodes:
    """The episodes a ``write_episodes`` file holds."""
    with np.load(path) as data:
        return Episodes(**{k: data[k] for k in Episodes.__dataclass_fields__})


def key_seed(random_key: Any) -> list[int]:
    """The raw words of a JAX PRNG key (or of topo's ``${seed.key}``, its raw data)."""
    return [int(v) for v in np.asarray(random_key, dtype=np.uint32).ravel()]


def int_seed(random_key: Any) -> int:
    """A non-negative 31-bit integer seed derived from a PRNG key (for numpy, gymnasium)."""
    return int(np.random.SeedSequence(key_seed(random_key)).generate_state(1)[0] >> 1)


class Batches:
    """Endless minibatches of transitions drawn uniformly (with replacement) from ``data``.
    ``save()``/``restore()`` give and set where its random stream is, so a learner
    restored from a snapshot draws the batches the saved one would have drawn next."""

    def __init__(self, data: Episodes, batch_size: int, seed: Any = 0) -> None:
        self._data = data
        self._size = batch_size
        self._rng = np.random.default_rng(seed)
        self._episode_return = data.episode_return.astype(np.float32)[data.episode]

    def __iter__(self) -> Iterator[Batch]:
        return self

    def __next__(self) -> Batch:
        index = self._rng.integers(0, len(self._data), size=self._size)
        batch = {k: getattr(self._data, k)[index] for k in FIELDS}
        batch["episode_return"] = self._episode_return[index]
        return batch

    def save(self) -> dict[str, Any]:
        """Where the draws are (the generator's state)."""
        return dict(self._rng.bit_generator.state)

    def restore(self, state: dict[str, Any]) -> None:
        """Draw on from where a saved iterator was."""
        self._rng.bit_generator.state = dict(state)


def batches(data: Episodes, batch_size: int, seed: Any = 0) -> Batches:
    """Endless minibatches of transitions drawn uniformly (with replacement) from ``data``
    (an iterator whose position a snapshot keeps)."""
    return Batches(data, batch_size, seed)


def load_or_record(path: str | Path | None, episodes: int, seed: int, mix: Mix = MIX) -> Episodes:
    """The dataset at ``path`` when it was recorded with these settings (the mix's
    description and the number of episodes); else record it (and write it there when
    ``path`` is given)."""
    if path is not None and Path(path).exists():
        with np.load(path) as data:
            recorded = int(data["episode_return"].size)
            same = str(data["mix"]) == describe(mix) and recorded == episodes
        if same:
            return read_episodes(path)
    data = record_episodes(episodes, seed, mix)
    if path is not None:
        write_episodes(data, path, mix)
    return data


def transition_dataset(
    random_key: Any,
    episodes: int = 100,
    batch_size: int = 256,
    path: str | None = None,
    mix: str = "default",
) -> Iterator[Batch]:
    """The default dataset factory (Acme's ``demonstration_dataset_factory``): minibatches
    of transitions from ``episodes`` episodes of the mix, seeded by the key; recorded once
    into the ``.npz`` file ``path`` and read from it afterwards (None: kept in memory).
    ``mix`` names the behaviours (``MIXES``): ``"default"`` (``MIX``) or ``"fragments"``
    (``FRAGMENTS``: the expert logged in windows, its returns misleading); a file holds
    one mix, and another mix's recording replaces it."""
    seed = int_seed(random_key)
    file = None if path is None else Path(path).with_name(f"{Path(path).stem}-{seed}.npz")
    return batches(load_or_record(file, episodes, seed, mix), batch_size, seed + 1)
