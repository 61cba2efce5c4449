"""The switch riddle against hand-worked episodes."""

from __future__ import annotations

import numpy as np
import pytest

from examples.agents.switch import NONE, TELL, SwitchGame, episode_limit, oracle_return


def _idle(n: int) -> list[int]:
    return [NONE] * n


def test_episode_length_is_the_papers() -> None:
    assert [episode_limit(n) for n in (2, 3, 4)] == [2, 6, 10]


def test_who_is_interrogated_and_what_they_see() -> None:
    game = SwitchGame(3, schedule=[1, 0, 0, 2, 1, 0])
    obs = game.reset()
    assert obs.interrogated == 1 and obs.day == 0
    assert obs.in_room.tolist() == [0.0, 1.0, 0.0]
    assert obs.bulb.tolist() == [0.0, 0.0, 0.0]  # the bulb starts off
    step = game.step(_idle(3), bulb=1.0)  # prisoner 1 turns the bulb on
    assert step.observation.interrogated == 0 and step.reward == 0.0 and not step.done
    assert step.observation.bulb.tolist() == [1.0, 0.0, 0.0]  # only the one in the room sees it
    step = game.step(_idle(3))  # prisoner 0 leaves it as it is
    assert step.observation.bulb.tolist() == [1.0, 0.0, 0.0]
    step = game.step(_idle(3), bulb=0.0)  # and now switches it off
    assert step.observation.interrogated == 2
    assert step.observation.bulb.tolist() == [0.0, 0.0, 0.0]
    assert step.all_interrogated
    assert game.interrogated == [1, 0, 0, 2]


def test_a_correct_announcement_pays_one() -> None:
    game = SwitchGame(3, schedule=[0, 1, 2])
    game.reset()
    game.step(_idle(3))
    game.step(_idle(3))
    # Prisoner 2 is in the room and everyone has been: telling wins.
    step = game.step([NONE, NONE, TELL])
    assert step.done and step.reward == 1.0 and step.all_interrogated


def test_a_wrong_announcement_costs_one_and_only_the_one_in_the_room_counts() -> None:
    game = SwitchGame(3, schedule=[0, 1, 2])
    game.reset()
    # Prisoners 1 and 2 are not in the room: their TELL is ignored.
    step = game.step([NONE, TELL, TELL])
    assert not step.done and step.reward == 0.0
    step = game.step([NONE, TELL, NONE])  # prisoner 1, in the room, tells too early
    assert step.done and step.reward == -1.0 and not step.all_interrogated
    with pytest.raises(RuntimeError, match="reset"):
        game.step(_idle(3))


def test_silence_ends_after_the_limit_with_nothing() -> None:
    game = SwitchGame(3, seed=7)
    game.reset()
    rewards = []
    for _ in range(episode_limit(3)):
        step = game.step(_idle(3))
        rewards.append(step.reward)
    assert step.done and rewards == [0.0] * episode_limit(3)
    assert len(game.interrogated) == episode_limit(3)


def test_random_draws_are_uniform_and_seeded() -> None:
    a = SwitchGame(4, seed=3)
    b = SwitchGame(4, seed=3)
    orders = []
    for game in (a, b):
        seen = []
        for _ in range(200):
            game.reset()
            while not game.step(_idle(4)).done:
                pass
            seen.extend(game.interrogated)
        orders.append(seen)
    assert orders[0] == orders[1]
    counts = np.bincount(orders[0], minlength=4) / len(orders[0])
    assert np.all(np.abs(counts - 0.25) < 0.05)


def test_oracle_return() -> None:
    assert oracle_return([0, 1, 0, 2, 1, 1], 3) == 1.0
    assert oracle_return([0, 1, 0, 1, 1, 1], 3) == 0.0
    assert oracle_return([0, 1, 0, 1, 1, 1, 2], 3) == 0.0  # prisoner 2 comes after the limit


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        SwitchGame(1)
    with pytest.raises(ValueError, match=r"prisoners 0\.\.2"):
        SwitchGame(3, schedule=[0, 3])
    game = SwitchGame(3, schedule=[0])
    game.reset()
    with pytest.raises(ValueError, match="expected 3 actions"):
        game.step([NONE])
    with pytest.raises(ValueError, match="no prisoner for day 1"):
        game.step(_idle(3))


def test_the_whole_schedule_is_drawn_at_reset_so_an_early_end_can_be_scored() -> None:
    game = SwitchGame(3, seed=11)
    game.reset()
    plan = game.schedule
    assert len(plan) == episode_limit(3)
    step = game.step([TELL, TELL, TELL])  # whoever is in the room tells on day 0
    assert step.done and step.reward == -1.0
    assert game.interrogated == plan[:1]
    assert game.schedule == plan  # still there for oracle_return
