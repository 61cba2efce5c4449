"""The switch riddle (Foerster et al., 2016, "Learning to Communicate with Deep
Multi-Agent Reinforcement Learning", section 6.2), in numpy.

``n`` prisoners; each day one of them, drawn uniformly at random, is interrogated. The
interrogation room has a light bulb with a switch: only the prisoner in the room sees
the bulb and may set it, and the next prisoner interrogated sees what was left. The
prisoner in the room may also announce that every prisoner has been interrogated: the
episode ends with reward +1 if that is true and -1 if not. Otherwise the episode ends
after ``4n - 6`` days with reward 0. The reward is shared by all prisoners and
undiscounted. Prisoners outside the room see nothing and their actions are ignored.

The bulb is the one bit of communication: DIAL learns what to put on it (through its
differentiable message unit while training, the environment's bulb when executing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

NONE, TELL = 0, 1  # the environment actions


def episode_limit(num_agents: int) -> int:
    """The paper's episode length, ``4n - 6`` days (at least one day)."""
    return max(1, 4 * num_agents - 6)


@dataclass(frozen=True)
class Observation:
    """What the prisoners see on day ``day``: who is in the room (one-hot) and the bulb,
    shown only to the prisoner in the room (0 for everyone else)."""

    day: int
    in_room: np.ndarray  # (n,) float32, 1.0 for the interrogated prisoner
    bulb: np.ndarray  # (n,) float32, the bulb's state for the interrogated prisoner only

    @property
    def interrogated(self) -> int:
        """Index of the prisoner in the room."""
        return int(np.argmax(self.in_room))


@dataclass(frozen=True)
class Step:
    """The outcome of one day."""

    observation: Observation
    reward: float
    done: bool
    all_interrogated: bool  # every prisoner has been in the room by now


class SwitchGame:
    """The switch riddle for ``num_agents`` prisoners.

    ``schedule`` fixes who is interrogated on each day (for tests and replays);
    otherwise a ``numpy`` generator seeded with ``seed`` draws them."""

    def __init__(
        self,
        num_agents: int = 3,
        seed: int | None = None,
        schedule: Sequence[int] | None = None,
    ) -> None:
        if num_agents < 2:
            raise ValueError(f"the switch riddle needs at least 2 prisoners, got {num_agents}")
        self.num_agents = num_agents
        self.limit = episode_limit(num_agents)
        self._rng = np.random.default_rng(seed)
        self._schedule = None if schedule is None else [int(a) for a in schedule]
        if self._schedule is not None and any(not 0 <= a < num_agents for a in self._schedule):
            raise ValueError(f"schedule entries must be prisoners 0..{num_agents - 1}")
        self._day = 0
        self._bulb = 0.0
        self._visited = np.zeros(num_agents, dtype=bool)
        self._order: list[int] = []
        self._plan: list[int] = []
        self._done = True

    def _draw(self, day: int) -> int:
        if day >= len(self._plan):
            raise ValueError(f"the schedule has no prisoner for day {day}")
        return self._plan[day]

    def _observe(self) -> Observation:
        who = self._order[-1]
        in_room = np.zeros(self.num_agents, np.float32)
        in_room[who] = 1.0
        bulb = np.zeros(self.num_agents, np.float32)
        bulb[who] = self._bulb
        return Observation(self._day, in_room, bulb)

    def reset(self) -> Observation:
        """Start an episode: the bulb is off and the first prisoner is in the room. Who is
        interrogated on every day is drawn now (``schedule``), so an episode that ends
        early can still be scored against the best possible return."""
        if self._schedule is not None:
            self._plan = list(self._schedule)
        else:
            self._plan = [int(a) for a in self._rng.integers(self.num_agents, size=self.limit)]
        self._day = 0
        self._bulb = 0.0
        self._visited[:] = False
        self._order = [self._draw(0)]
        self._visited[self._order[0]] = True
        self._done = False
        return self._observe()

    def step(self, actions: Sequence[int], bulb: float | None = None) -> Step:
        """One day: ``actions[i]`` is prisoner i's NONE/TELL (only the one in the room
        counts); ``bulb`` is the state he leaves the bulb in (None: untouched)."""
        if self._done:
            raise RuntimeError("the episode is over: call reset()")
        if len(actions) != self.num_agents:
            raise ValueError(f"expected {self.num_agents} actions, got {len(actions)}")
        who = self._order[-1]
        everyone = bool(self._visited.all())
        if int(actions[who]) == TELL:
            self._done = True
            return Step(self._observe(), 1.0 if everyone else -1.0, True, everyone)
        if bulb is not None:
            self._bulb = float(bulb)
        self._day += 1
        if self._day >= self.limit:
            self._done = True
            return Step(self._observe(), 0.0, True, everyone)
        nxt = self._draw(self._day)
        self._order.append(nxt)
        self._visited[nxt] = True
        return Step(self._observe(), 0.0, False, bool(self._visited.all()))

    def save(self) -> dict[str, Any]:
        """Where the stream of who is interrogated is (a snapshot keeps it)."""
        return dict(self._rng.bit_generator.state)

    def restore(self, state: dict[str, Any]) -> None:
        """Draw the schedules a saved game would have drawn next."""
        self._rng.bit_generator.state = dict(state)

    @property
    def interrogated(self) -> list[int]:
        """Who was in the room on each day of the episode so far."""
        return list(self._order)

    @property
    def schedule(self) -> list[int]:
        """Who is interrogated on each day of this episode, including days not reached."""
        return list(self._plan)


def oracle_return(order: Sequence[int], num_agents: int) -> float:
    """The best return possible given who is interrogated when (``SwitchGame.schedule``):
    1 if every prisoner is interrogated within the episode's days (the last of them can
    then tell), else 0. The paper normalises rewards by it."""
    limit = episode_limit(num_agents)
    return 1.0 if len(set(order[:limit])) == num_agents else 0.0
