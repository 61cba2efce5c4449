"""Nodes for the snapshot tests: a stepping node wired to a counter, as a learner is."""

from __future__ import annotations

import os
import random
import threading
import time
from typing import Any

import topo


class Stepper:
    """Counts its steps and tells the counter after each; keeps an RNG stream."""

    def __init__(self, counter: Any, key: str = "steps", sleep_s: float = 0.002) -> None:
        self.counter = counter
        self.key = key
        self.sleep_s = sleep_s
        self.steps = 0
        self.rng = random.Random(1234)
        self.draws: list[float] = []
        self.restored_from: int | None = None

    def run(self) -> None:
        while not topo.stop_event().is_set():
            self.draws.append(self.rng.random())
            self.steps += 1
            self.counter.increment(**{self.key: 1})
            topo.pausepoint()
            time.sleep(self.sleep_s)

    def status(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "restored_from": self.restored_from,
            "first_draw": self.draws[0] if self.draws else None,
            "pid": os.getpid(),
        }

    def save(self) -> dict[str, Any]:
        return {"steps": self.steps, "rng": self.rng.getstate()}

    def restore(self, state: dict[str, Any]) -> None:
        self.steps = self.restored_from = int(state["steps"])
        self.rng.setstate(state["rng"])


class Crasher(Stepper):
    """A Stepper whose loop raises once asked to with ``fail()``."""

    def __init__(self, counter: Any, **kwargs: Any) -> None:
        super().__init__(counter, **kwargs)
        self._fail = False

    def fail(self) -> None:
        self._fail = True

    def run(self) -> None:
        while not topo.stop_event().is_set():
            if self._fail:
                raise RuntimeError(f"crashed at step {self.steps}")
            self.steps += 1
            self.counter.increment(**{self.key: 1})
            topo.pausepoint()
            time.sleep(self.sleep_s)


class SlowSaver(Stepper):
    """A Stepper whose save takes ``save_s`` seconds (a snapshot to interrupt)."""

    def __init__(self, counter: Any, save_s: float = 0.0, **kwargs: Any) -> None:
        super().__init__(counter, **kwargs)
        self.save_s = save_s

    def slow_down(self, save_s: float) -> None:
        self.save_s = save_s

    def save(self) -> dict[str, Any]:
        print(f"saving for {self.save_s:g} s", flush=True)  # a test waits for this line
        time.sleep(self.save_s)
        return super().save()


class Picky:
    """Refuses any state it is given (a state its restore rejects)."""

    def save(self) -> dict[str, Any]:
        return {"v": 1}

    def restore(self, state: dict[str, Any]) -> None:
        raise ValueError(f"this version cannot read state {sorted(state)}")

    def ping(self) -> str:
        return "pong"


class Dozer(Stepper):
    """A Stepper whose one step, after its first pause point, lasts a minute: says
    ``dozing`` (in its status) once it is in it."""

    def run(self) -> None:
        self.steps += 1
        topo.pausepoint()
        self.dozing = True
        topo.stop_event().wait(60)

    def status(self) -> dict[str, Any]:
        return {**super().status(), "dozing": getattr(self, "dozing", False)}


class Holder(Stepper):
    """A Stepper whose ``hold()`` keeps a handler thread until the process ends (with
    ``rpc.threads: 1``, every thread of the node busy)."""

    def hold(self) -> None:
        print("holding", flush=True)  # a test waits for this line
        threading.Event().wait()


def probe(steppers: list[Any], seconds: float = 3.0) -> None:
    """Let the steppers run a while, then print where each started from (a ``py`` node
    that ends the program)."""
    time.sleep(seconds)
    print("RESTORED_FROM", [s.status()["restored_from"] for s in steppers], flush=True)


class Capturer(Stepper):
    """A Stepper that takes its state in two steps: ``capture_state`` copies the steps and
    the RNG while the program is held, and the function it returns builds the state
    ``build_s`` seconds later, noting how many steps the node had made by then."""

    def __init__(self, counter: Any, build_s: float = 1.0, **kwargs: Any) -> None:
        super().__init__(counter, **kwargs)
        self.build_s = build_s
        self.captures = 0

    def capture_state(self) -> Any:
        self.captures += 1
        steps, rng = self.steps, self.rng.getstate()

        def build() -> dict[str, Any]:
            time.sleep(self.build_s)
            return {"steps": steps, "rng": rng, "steps_when_built": self.steps}

        return build

    def capture_count(self) -> int:
        return self.captures
