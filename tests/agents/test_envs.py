"""The agents' environments by name (examples/agents/envs.py): gymnasium ids with
discrete actions and dm_env factories, behind gymnasium's interface, flat float32
observations, and a spec the networks and the replay are made from."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("gymnasium", "dm_env")),
    reason="needs the rl extra",
)

from examples.agents.envs import EnvError, EnvSpec, make_environment, spec_of  # noqa: E402

CORRIDOR = "dm_env:tests.agents.dm_corridor:corridor"


@pytest.mark.parametrize(
    ("name", "size", "actions", "limit"),
    [
        ("CartPole-v1", 4, 2, 500),
        ("Acrobot-v1", 6, 3, 500),
        ("gym:MountainCar-v0", 2, 3, 200),
        (CORRIDOR, 6, 2, None),
    ],
)
def test_the_spec_is_read_from_the_environment(
    name: str, size: int, actions: int, limit: int | None
) -> None:
    assert spec_of(name) == EnvSpec(name, size, actions, limit)
    env = make_environment(name, 7)
    observation, _ = env.reset(seed=7)
    assert observation.dtype == np.float32 and observation.shape == (size,)
    step = env.step(actions - 1)
    assert step[0].shape == (size,) and isinstance(step[1], float)


def test_a_dm_env_end_is_terminated_and_a_cut_truncated() -> None:
    env = make_environment(CORRIDOR, 0)
    observation, _ = env.reset(seed=1)
    start, goal = int(np.argmax(observation[:5])), int(observation[5])
    # walking to the goal ends the episode there, reward 1, discount 0: terminated
    toward = 1 if goal > 0 else 0
    steps = [env.step(toward) for _ in range(4 - start if toward else start)]
    assert [s[2:4] for s in steps[:-1]] == [(False, False)] * (len(steps) - 1)
    assert steps[-1][1:4] == (1.0, True, False)
    # and walking away from it ends it with nothing
    observation, _ = env.reset(seed=1)
    away = [env.step(1 - toward) for _ in range(start if toward else 4 - start)]
    assert away[-1][1:4] == (0.0, True, False)
    # the shifted corridor cuts after 3 steps without an end: truncated (discount 1)
    cut = make_environment("dm_env:tests.agents.dm_corridor:shifted")
    cut.reset()
    assert [cut.step(a)[2:4] for a in (1, 0, 1)] == [(False, False)] * 2 + [(False, True)]


def test_seeded_resets_repeat_and_actions_start_at_zero() -> None:
    env = make_environment(CORRIDOR, 0)
    starts = [tuple(env.reset(seed=s)[0]) for s in (3, 4, 3, 4)]
    assert starts[:2] == starts[2:]  # the factory made again with the seed
    shifted = make_environment("dm_env:tests.agents.dm_corridor:shifted")
    assert (
        shifted.action_space.n == 2
        and spec_of("dm_env:tests.agents.dm_corridor:shifted").num_actions == 2
    )
    shifted.reset()
    assert int(np.argmax(shifted.step(1)[0][:5])) in (2, 3, 4)  # 1 is the env's 4: right
    shifted.reset()
    with pytest.raises(AssertionError):
        shifted.step(2)  # (the env's 5: not one of its actions; the adapter adds 3)


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("Pendulum-v1", "has actions Box(-2.0, 2.0, (1,), float32): the agents need discrete"),
        ("NoSuchEnv-v0", "environment 'NoSuchEnv-v0': Environment `NoSuchEnv` doesn't exist"),
        ("dm_env:tests.agents.dm_corridor:continuous", "has actions of float32: the agents"),
        ("dm_env:tests.agents.dm_corridor", "expected dm_env:package.module:factory"),
        ("dm_env:tests.agents.nowhere:corridor", "No module named 'tests.agents.nowhere'"),
    ],
)
def test_an_environment_the_agents_cannot_play_is_named(name: str, says: str) -> None:
    with pytest.raises(EnvError, match=None) as info:
        make_environment(name)
    assert says in str(info.value)
