"""Node code for the backend tests (imported by the launcher and the fork server)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import topo


class Echo:
    """A served object without run(): serves until the program stops."""

    def __init__(self, **kwargs: Any) -> None:
        self.kwargs = kwargs
        self.n = 0

    def ping(self) -> str:
        return "pong"

    def get_variables(self, names: list[str] | None = None) -> dict[str, int]:
        """A variable source whose version counts its calls (to see what a cache absorbs)."""
        self.n += 1
        return {"version": self.n}

    def env(self, name: str) -> str | None:
        return os.environ.get(name)

    def cwd(self) -> str:
        return os.getcwd()

    def whoami(self) -> tuple[str, int]:
        return topo.current_node().id, os.getpid()


class Crasher:
    """run() raises after a short delay."""

    def __init__(self, message: str = "boom", delay: float = 0.2) -> None:
        self.message = message
        self.delay = delay

    def run(self) -> None:
        time.sleep(self.delay)
        print(f"about to fail: {self.message}", flush=True)
        raise ValueError(self.message)


class Stubborn:
    """run() ignores the stop event (so the launcher has to kill it after the grace)."""

    def run(self) -> None:
        while True:
            time.sleep(0.1)

    def ping(self) -> str:
        return "pong"


class Stopper:
    """Calls peers, then topo.stop()."""

    def __init__(self, peers: list[Any], delay: float = 0.3) -> None:
        self.peers = peers
        self.delay = delay

    def run(self) -> None:
        answers = [p.ping() for p in self.peers]
        print(f"answers: {answers}", flush=True)
        time.sleep(self.delay)
        topo.stop("stopper is done")
        topo.wait_for_stop(30)


def hello(greeting: str = "hello") -> None:
    """A py node: a plain function run, no server."""
    print(f"{greeting} from {topo.current_node().id}", flush=True)


class SlowStart:
    """A constructor that does not return for ``seconds`` (a node stuck starting)."""

    def __init__(self, seconds: float = 20.0) -> None:
        time.sleep(seconds)

    def ping(self) -> str:
        return "pong"


class Exiter:
    """run() ends the whole process with os._exit (what threads cannot isolate)."""

    def __init__(self, code: int = 3, delay: float = 0.5) -> None:
        self.code = code
        self.delay = delay

    def run(self) -> None:
        time.sleep(self.delay)
        os._exit(self.code)


class Inner:
    """What a wrapper exposes through ``__dir__`` (Acme's checkpointing runners do this)."""

    def step(self) -> str:
        return "inner step"


class Wrapper:
    """Serves ``step`` although its class has no such method: ``dir(instance)`` lists it."""

    def __init__(self) -> None:
        self._inner = Inner()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {"step"})

    def own(self) -> str:
        return "own"


class Sleeper:
    """Answers after ``seconds``."""

    def nap(self, seconds: float) -> str:
        time.sleep(seconds)
        return "rested"


class Caller:
    """Calls ``peer.nap(seconds)`` and reports what happened."""

    def __init__(self, peer: Any) -> None:
        self.peer = peer

    def ask(self, seconds: float) -> str:
        try:
            return str(self.peer.nap(seconds))
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"


class RaisesOnStop:
    """Waits for the stop, then raises (a peer gone mid-call looks like this)."""

    def run(self) -> None:
        topo.wait_for_stop()
        raise ConnectionError("peer went away while stopping")


class Runner:
    """Records whether run() was called."""

    def __init__(self) -> None:
        self.ran = False

    def run(self) -> None:
        self.ran = True
        topo.wait_for_stop()

    def did_run(self) -> bool:
        return self.ran


class Holder:
    """``hold()`` keeps its handler thread until the process ends (with ``rpc.threads:
    1``, the node's only one); ``pid()`` says which process serves."""

    def hold(self) -> None:
        print("holding", flush=True)  # a test waits for this line
        threading.Event().wait()

    def pid(self) -> int:
        return os.getpid()
