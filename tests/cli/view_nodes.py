"""Nodes for the live-view tests: one that idles until the stop, one slow to stop."""

from __future__ import annotations

import time

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
