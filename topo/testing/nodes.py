"""The nodes the backend conformance suite runs (``target: topo.testing.nodes:Name``).

They live in topo itself so that every backend's nodes can import them where topo is
installed (an ssh host, a Ray worker), with no test folder shipped. They print what the
suite reads in logs, and answer calls about themselves (their pid, where they run).
"""

from __future__ import annotations

import os
import random
import socket
import sys
import threading
import time
from typing import Any

from topo.runtime.lifecycle import current_node, stop, stop_event, wait_for_stop
from topo.runtime.pause import pausepoint

DEVICE_KEYS = ("JAX_PLATFORMS", "CUDA_VISIBLE_DEVICES", "PJRT_DEVICE")


class Echo:
    """Serves until the program stops: ``ping``, and who and where it is."""

    def ping(self) -> str:
        return "pong"

    def whoami(self) -> tuple[str, int]:
        return current_node().id, os.getpid()

    def where(self) -> dict[str, Any]:
        return {"node": current_node().id, "pid": os.getpid(), "host": socket.gethostname()}

    def devices(self) -> dict[str, str | None]:
        """What its process was told of the accelerators it may open."""
        return {k: os.environ.get(k) for k in DEVICE_KEYS}


class Producer(Echo):
    """Answers ``square(x)``; prints a line per call (its log shows the work done)."""

    def square(self, x: int) -> int:
        print(f"square {x}", flush=True)
        return x * x


class Consumer:
    """Asks its producers for ``items`` squares, prints their sum and returns: with
    ``stops_program`` the program then ends, exit 0."""

    def __init__(self, producers: list[Any], items: int = 6) -> None:
        self.producers = producers
        self.items = items

    def run(self) -> None:
        done = [self.producers[i % len(self.producers)].square(i) for i in range(self.items)]
        print(f"{len(done)} results from {len(self.producers)} producers, sum {sum(done)}")


def hello(greeting: str = "hello") -> None:
    """A ``py`` node: a function run once, no server."""
    print(f"{greeting} from {current_node().id}", flush=True)


class Stopper:
    """Calls its peers (handles, or lists of them), then asks the whole program to stop
    (``topo.stop``)."""

    def __init__(self, peers: list[Any]) -> None:
        self.peers = [p for group in peers for p in (group if isinstance(group, list) else [group])]

    def run(self) -> None:
        print(f"answers: {[p.ping() for p in self.peers]}", flush=True)
        stop("stopper is done")
        wait_for_stop(30)


class Runner(Echo):
    """Records whether ``run()`` was called (``disable_run`` leaves it uncalled)."""

    def __init__(self) -> None:
        self.ran = threading.Event()

    def run(self) -> None:
        self.ran.set()
        wait_for_stop()

    def did_run(self) -> bool:
        return self.ran.is_set()


class Inner:
    def step(self) -> str:
        return "inner step"


class Wrapper:
    """Serves ``step``, which only ``dir(instance)`` lists (as Acme's wrappers do)."""

    def __init__(self) -> None:
        self._inner = Inner()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {"step"})

    def own(self) -> str:
        return "own"


class Sleeper:
    def nap(self, seconds: float) -> str:
        time.sleep(seconds)
        return "rested"


class Asker:
    """Calls ``peer.nap(seconds)`` and says how the call ended."""

    def __init__(self, peer: Any) -> None:
        self.peer = peer

    def ask(self, seconds: float) -> str:
        try:
            return str(self.peer.nap(seconds))
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"


class Talker(Echo):
    """Prints ``lines`` numbered lines to stdout and one to stderr as it starts (before it
    serves), then serves."""

    def __init__(self, lines: int = 3) -> None:
        me = current_node().id
        for i in range(lines):
            print(f"{me} said {i}", flush=True)
        print(f"{me} warned on stderr", file=sys.stderr, flush=True)


class Crasher:
    """``run()`` prints a line, then raises ``ValueError(message)`` after ``delay``."""

    def __init__(self, message: str = "boom", delay: float = 0.05) -> None:
        self.message, self.delay = message, delay

    def run(self) -> None:
        time.sleep(self.delay)
        print(f"about to fail: {self.message}", flush=True)
        raise ValueError(self.message)


class Stubborn(Echo):
    """``run()`` ignores the stop: the launcher must kill it once the grace is over."""

    def run(self) -> None:
        while True:
            time.sleep(0.1)


class RaisesOnStop:
    """Raises once the stop comes (a peer gone mid-call looks like this): a clean stop."""

    def run(self) -> None:
        wait_for_stop()
        raise ConnectionError("peer went away while stopping")


class Leaker:
    """Allocates (and touches) ``mib_per_s`` MiB a second until stopped or killed."""

    def __init__(self, mib_per_s: int = 200) -> None:
        self.rate = mib_per_s
        self.hoard: list[bytearray] = []

    def run(self) -> None:
        while not stop_event().is_set():
            self.hoard.append(bytearray(self.rate * 2**20 // 10))  # zero-filled: resident
            time.sleep(0.1)


class Ticker:
    """Prints ``<name> tick <i>`` every ``every`` seconds until the program stops."""

    def __init__(self, name: str = "t", every: float = 0.2) -> None:
        self.name, self.every = name, every

    def run(self) -> None:
        i = 0
        while not wait_for_stop(self.every):
            print(f"{self.name} tick {i}", flush=True)
            i += 1


class Stepper:
    """Counts its steps, tells the counter after each and draws from a seeded random
    stream; its state (``save``/``restore``) is the count and the stream."""

    def __init__(self, counter: Any) -> None:
        self.counter = counter
        self.steps = 0
        self.rng = random.Random(1234)
        self.first_draw: float | None = None
        self.restored_from: int | None = None

    def run(self) -> None:
        while not stop_event().is_set():
            draw = self.rng.random()
            if self.first_draw is None:
                self.first_draw = draw
            self.steps += 1
            self.counter.increment(steps=1)
            pausepoint()
            time.sleep(0.002)

    def status(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "restored_from": self.restored_from,
            "first_draw": self.first_draw,
            "pid": os.getpid(),
        }

    def save(self) -> dict[str, Any]:
        return {"steps": self.steps, "rng": self.rng.getstate()}

    def restore(self, state: dict[str, Any]) -> None:
        self.steps = self.restored_from = int(state["steps"])
        self.rng.setstate(state["rng"])
        print(f"restored at step {self.steps}", flush=True)


class Worker(Echo):
    """A group's replica: ``work(x)`` answers with its id, tag and pid."""

    def __init__(self, worker_id: int, tag: str = "v1") -> None:
        self.worker_id, self.tag = worker_id, tag
        print(f"worker {worker_id} ({tag}) up", flush=True)

    def work(self, x: int) -> dict[str, Any]:
        return {"id": self.worker_id, "tag": self.tag, "pid": os.getpid(), "x": x}

    def pid(self) -> int:
        return os.getpid()


class Looper(Echo):
    """Calls every member of ``workers`` in turn until the stop; ``stats()`` counts the
    calls, the errors and who answered (a change to the group must cause none)."""

    def __init__(self, workers: list[Any]) -> None:
        self.workers = workers
        self.calls = 0
        self.errors: list[str] = []
        self.answered: dict[str, int] = {}
        self._lock = threading.Lock()

    def run(self) -> None:
        stop = stop_event()
        while not stop.is_set():
            for worker in list(self.workers):
                try:
                    worker.work(self.calls)
                except Exception as exc:
                    if stop.is_set():
                        return
                    with self._lock:
                        self.errors.append(f"{worker.node_id}: {type(exc).__name__}: {exc}")
                    continue
                with self._lock:
                    self.calls += 1
                    self.answered[worker.node_id] = self.answered.get(worker.node_id, 0) + 1
            time.sleep(0.002)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": self.calls,
                "errors": list(self.errors),
                "members": [w.node_id for w in self.workers],
                "answered": dict(self.answered),
            }

    def pid(self) -> int:
        return os.getpid()


class Breaker:
    """Stops at ``breakpoint()`` in its run (``topo debug``), then says what its local
    became and waits for the stop."""

    def run(self) -> None:
        value = 41
        breakpoint()
        value += 1
        print(f"after the breakpoint: {value}", flush=True)
        wait_for_stop()
