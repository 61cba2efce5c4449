"""Small stand-in agents for the Launchpad seed programs in this package.

Each class takes the parameters of the target of the same role in
``examples/topologies/*.yaml`` and does a little real work, cheaply: actors count
their steps on the counter and insert into Reverb, learners count theirs and serve
variables, evaluators read them. Every loop ends when the program stops.
"""

from __future__ import annotations

from typing import Any

import topo.launchpad as lp

TABLE = "transitions"


def make_replay_tables(max_size: int = 1000) -> list[Any]:
    """One real Reverb table: uniform sampling, oldest removed first."""
    import reverb

    return [
        reverb.Table(
            name=TABLE,
            sampler=reverb.selectors.Uniform(),
            remover=reverb.selectors.Fifo(),
            max_size=max_size,
            rate_limiter=reverb.rate_limiters.MinSize(1),
        )
    ]


def _key_int(random_key: Any) -> int:
    """A PRNG key (a uint32 pair) or an int seed, as one int."""
    try:
        return int(random_key[-1])
    except (TypeError, IndexError):
        return int(random_key or 0)


class Learner:
    """Counts learner steps; serves its variables (the step it is at)."""

    def __init__(
        self,
        random_key: Any = 0,
        replay: Any = None,
        counter: Any = None,
        primary_learner: Any = None,
        *,
        step_s: float = 0.02,
    ) -> None:
        self.seed = _key_int(random_key)
        self.replay, self.counter, self.primary = replay, counter, primary_learner
        self.step_s = step_s
        self.steps = 0

    def get_variables(self, names: Any = ()) -> dict[str, int]:
        """The 'parameters': the learner's step."""
        return {"step": self.steps, "seed": self.seed}

    def step(self) -> int:
        """One learner step: counted (only the primary learner has a counter)."""
        self.steps += 1
        if self.counter is not None:
            self.counter.increment(learner_steps=1)
        return self.steps

    def run(self) -> None:
        while not lp.wait_for_stop(self.step_s):
            self.step()


class Actor:
    """Steps an 'environment': counts actor steps, inserts each step into the replay."""

    def __init__(
        self,
        random_key: Any,
        replay: Any,
        variable_source: Any,
        counter: Any,
        actor_id: int = 0,
        *,
        step_s: float = 0.02,
    ) -> None:
        self.seed = _key_int(random_key)
        self.replay, self.variable_source, self.counter = replay, variable_source, counter
        self.actor_id, self.step_s = actor_id, step_s
        self.steps = 0

    def step(self) -> int:
        """One environment step."""
        import numpy as np

        if self.steps % 10 == 0 and self.variable_source is not None:
            self.variable_source.get_variables()
        if self.replay is not None:
            self.replay.insert([np.array([self.actor_id, self.steps], np.int32)], {TABLE: 1.0})
        self.steps += 1
        self.counter.increment(actor_steps=1)
        return self.steps

    def run(self) -> None:
        while not lp.wait_for_stop(self.step_s):
            self.step()


class Evaluator:
    """Reads the variables of its source now and then; counts evaluator episodes."""

    def __init__(
        self,
        random_key: Any,
        variable_source: Any,
        counter: Any,
        make_actor: Any = None,
        *,
        every_s: float = 0.2,
    ) -> None:
        self.seed = _key_int(random_key)
        self.variable_source, self.counter, self.make_actor = variable_source, counter, make_actor
        self.every_s = every_s
        self.seen: list[Any] = []

    def run(self) -> None:
        while not lp.wait_for_stop(self.every_s):
            self.seen.append(self.variable_source.get_variables())
            self.counter.increment(evaluator_episodes=1)


def make_actor(random_key: Any, policy_network: Any, variable_source: Any) -> Any:
    """What evaluators build their actor with (Acme's builder.make_actor)."""
    return Actor(random_key, None, variable_source, None)


class ModelSaver:
    """Snapshots the learner's variables (kept in memory here)."""

    def __init__(self, variable_source: Any) -> None:
        self.variable_source = variable_source
        self.snapshots: list[Any] = []

    def save(self) -> int:
        self.snapshots.append(self.variable_source.get_variables())
        return len(self.snapshots)


class Trainer(Learner):
    """Mava's trainer: a learner that also counts trainer steps."""

    def __init__(self, replay: Any, counter: Any = None, *, step_s: float = 0.02) -> None:
        super().__init__(0, replay, counter, step_s=step_s)


class MavaEvaluator:
    """Mava's evaluator: reads the trainer's variables."""

    def __init__(self, variable_source: Any, counter: Any, trainer: Any) -> None:
        self.variable_source, self.counter, self.trainer = variable_source, counter, trainer
        self.seen: list[Any] = []

    def run(self) -> None:
        while not lp.wait_for_stop(0.2):
            self.seen.append(self.variable_source.get_variables())


class Executor(Actor):
    """Mava's executor: an actor counting executor steps, variables from a cache."""

    def __init__(
        self,
        executor_id: int,
        replay: Any,
        variable_source: Any,
        counter: Any,
        trainer: Any,
        *,
        step_s: float = 0.02,
    ) -> None:
        super().__init__(executor_id, replay, variable_source, counter, executor_id, step_s=step_s)
        self.trainer = trainer

    def step(self) -> int:
        steps = super().step()
        self.counter.increment(executor_steps=1)
        return steps
