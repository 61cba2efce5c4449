"""Nodes for the live-view tests: one that idles until the stop, one slow to stop, an
evaluator that reports a return and ends with a long closing line."""

from __future__ import annotations

import time

import topo
from topo.runtime import lifecycle


class Idle:
    """Says hello, then waits for the program's stop."""

    def __init__(self, line: str = "idle and well") -> None:
        self.line = line

    def run(self) -> None:
        print(self.line, flush=True)
        lifecycle.wait_for_stop()


class SlowToStop:
    """Ignores the stop for ``seconds`` (so the grace period runs, and shows)."""

    def __init__(self, seconds: float = 30.0) -> None:
        self.seconds = seconds

    def run(self) -> None:
        print("up; will be slow to stop", flush=True)
        lifecycle.wait_for_stop()
        time.sleep(self.seconds)


class SlowBuild:
    """Takes ``seconds`` to construct (as a replay that loads a checkpoint would), also
    when the program is stopping meanwhile."""

    def __init__(self, seconds: float = 6.0) -> None:
        time.sleep(seconds)

    def hello(self) -> str:
        return "hello"


class NeedsPeer:
    """Calls ``peer`` in its constructor, so it waits until the peer is up."""

    def __init__(self, peer: object) -> None:
        self.greeting = peer.hello()  # type: ignore[attr-defined]

    def run(self) -> None:
        print(f"peer said {self.greeting}", flush=True)
        lifecycle.wait_for_stop()


class Stepper:
    """Adds ``per_tick`` actor steps to ``counter`` ten times a second until the stop."""

    def __init__(self, counter: object, per_tick: int = 10) -> None:
        self.counter = counter
        self.per_tick = per_tick

    def run(self) -> None:
        while not lifecycle.wait_for_stop(0.1):
            self.counter.increment(actor_steps=self.per_tick)  # type: ignore[attr-defined]


FINAL = (
    "final evaluation return: 213.4 (mean of the last 10 episodes, greedy policy; "
    "this whole line must show)"
)


class Evaluator:
    """Writes a mean return (always 213.4) every ``every`` seconds and prints ``line``
    until the stop; then prints ``FINAL``, as examples/agents/dqn_eval.py prints its
    final evaluation return."""

    def __init__(self, every: float = 0.2, line: str = "evaluating") -> None:
        self.every = every
        self.line = line

    def run(self) -> None:
        log = topo.metrics.logger("evaluator")
        n = 0
        while not lifecycle.wait_for_stop(self.every):
            n += 1
            log.write({"mean_return": 213.4, "actor_steps": 1000 * n, "learner_steps": 300 * n})
            print(f"{self.line} {n}", flush=True)
        print(FINAL, flush=True)
