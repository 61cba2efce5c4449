"""Node code for the topo.launchpad tests: importable by name, so the procs backend's
fork server builds these in other processes (closures and lambdas are made in the tests)."""

from __future__ import annotations

import builtins
import ctypes
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

import topo.launchpad as lp


class Echo:
    """A served object: who it is, where it runs, what it was given."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args
        self.kwargs = kwargs

    def ping(self) -> str:
        return "pong"

    def pid(self) -> int:
        return os.getpid()

    def env(self, name: str) -> str | None:
        return os.environ.get(name)

    def given(self) -> dict[str, Any]:
        return {"args": list(self.args), "kwargs": sorted(self.kwargs)}

    def _private(self) -> str:
        return "hidden"


class Pair:
    """Takes two positional arguments (a constructor with a fixed signature)."""

    def __init__(self, left: Any, right: Any, *, scale: int = 1) -> None:
        self.left, self.right, self.scale = left, right, scale

    def total(self) -> int:
        return (self.left.value() + self.right.value()) * self.scale


class Value:
    """Serves one number."""

    def __init__(self, value: int) -> None:
        self._value = value

    def value(self) -> int:
        return self._value


class Fanout:
    """Calls every handle it was given in a list and a dict."""

    def __init__(self, peers: list[Any], by_name: dict[str, Any]) -> None:
        self.peers = peers
        self.by_name = by_name

    def values(self) -> dict[str, Any]:
        return {
            "list": [p.value() for p in self.peers],
            "dict": {k: v.value() for k, v in self.by_name.items()},
        }


class Slow:
    """A slow method (deadlines) and a method that counts concurrent callers."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._inside = 0
        self._most = 0

    def slow(self, seconds: float) -> str:
        time.sleep(seconds)
        return "done"

    def busy(self, seconds: float) -> int:
        with self._lock:
            self._inside += 1
            self._most = max(self._most, self._inside)
        time.sleep(seconds)
        with self._lock:
            self._inside -= 1
        return self._most

    def most(self) -> int:
        return self._most


class Inner:
    """What a wrapper exposes (Acme's learner behind a checkpointing runner)."""

    def step(self) -> str:
        return "stepped"

    def get_variables(self, names: list[str]) -> list[str]:
        return [f"var:{n}" for n in names]


class Wrapper:
    """Exposes the inner object's methods via ``__dir__`` + ``__getattr__``, as Acme's
    CheckpointingRunner does; its own class has neither ``step`` nor ``get_variables``."""

    def __init__(self) -> None:
        self._inner = Inner()

    def __dir__(self) -> list[str]:
        return sorted(set(dir(self._inner)) | set(object.__dir__(self)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def wrapper_only(self) -> str:
        return "wrapper"


class Runner:
    """Counts run() calls: a node whose run is disabled still serves ``runs``."""

    def __init__(self) -> None:
        self._runs = 0

    def run(self) -> None:
        self._runs += 1
        lp.wait_for_stop()

    def runs(self) -> int:
        return self._runs


class Producer:
    """Launchpad's consumer/producers example: work is a sum."""

    def work(self, context: int) -> int:
        return context


class Consumer:
    """Calls every producer once per step; its run() stops the program after some steps."""

    def __init__(self, producers: list[Any]) -> None:
        self._producers = producers
        self.steps = 0

    def step(self) -> list[int]:
        futures = [p.futures.work(i) for i, p in enumerate(self._producers)]
        self.steps += 1
        return [f.result() for f in futures]

    def run(self) -> None:
        for _ in range(3):
            self.step()
        lp.stop()


def consumer_producers(num_producers: int = 2) -> lp.Program:
    """The program of Launchpad's consumer/producers example."""
    program = lp.Program("consumer_producers")
    with program.group("producer"):
        producers = [program.add_node(lp.CourierNode(Producer)) for _ in range(num_producers)]
    program.add_node(lp.CourierNode(Consumer, producers=producers), label="consumer")
    return program


def stop_after(seconds: float = 0.0) -> None:
    """A PyNode that stops the whole program."""
    time.sleep(seconds)
    lp.stop()


def block() -> None:
    """A PyNode that waits for the program to stop."""
    lp.wait_for_stop()


def block_on_event() -> None:
    """A PyNode that waits on ``lp.stop_event()``."""
    lp.stop_event().wait()


def fail(message: str = "node broke") -> None:
    """A PyNode that raises."""
    raise ValueError(message)


def fail_as(kind: str, *args: Any) -> None:
    """A PyNode that raises the built-in exception ``kind`` with ``args``."""
    raise getattr(builtins, kind)(*args)


def fail_custom() -> None:
    """A PyNode that raises an exception type that is not a built-in."""
    raise NodeError("custom failure")


class NodeError(Exception):
    """An exception class of the user's own."""


def noop() -> None:
    """A PyNode that returns at once."""


def serve_on(address: lp.Address) -> None:
    """A PyNode with a TCP server of its own on ``address`` (as Launchpad programs serve
    on an ``lp.Address``): it answers one connection with its port and pid, then waits
    for the program to stop."""
    port = lp.get_port_from_address(address.resolve())
    with socket.create_server(("localhost", port)) as server:
        server.settimeout(60)
        conn, _ = server.accept()
        with conn:
            conn.sendall(f"{port} {os.getpid()}".encode())
    lp.wait_for_stop()


def returns(value: int) -> int:
    """A PyNode whose function returns something (Launchpad ignores it)."""
    return value


class Handlers:
    """Registers stop handlers; ``called`` says which of them ran.

    ``exit`` makes a handler raise SystemExit, as Acme's runtime terminator does."""

    def __init__(self, exit: bool = False) -> None:
        self._called: list[str] = []
        self._done = threading.Event()
        self._exit = exit
        lp.register_stop_handler(self._kept)
        lp.register_stop_handler(self._dropped)
        lp.unregister_stop_handler(self._dropped)

    def _kept(self) -> None:
        self._called.append("kept")
        self._done.set()
        if self._exit:
            raise SystemExit(1)

    def _dropped(self) -> None:
        self._called.append("dropped")

    def called(self) -> list[str]:
        return list(self._called)

    def run(self) -> None:
        self._done.wait()
        # Reached only once the handler ran: the program is stopping.
        print(f"handlers called: {self._called}", flush=True)


class RaiseOnStop:
    """run() raises once the program was asked to stop (a peer gone mid-call)."""

    def run(self) -> None:
        lp.wait_for_stop()
        raise ConnectionError("peer went away while stopping")


class WaitTimeout:
    """``lp.wait_for_stop(timeout)`` returns False while the program runs."""

    def __init__(self) -> None:
        self._early: bool | None = None

    def run(self) -> None:
        self._early = lp.wait_for_stop(0.05)
        lp.wait_for_stop()

    def early(self) -> bool | None:
        return self._early

    def stopping(self) -> bool:
        return lp.stop_event().is_set()


class Peer:
    """Refers to another Peer (wired with ``node.configure`` after both exist)."""

    def __init__(self, name: str, peer: Any = None) -> None:
        self._name = name
        self._peer = peer

    def name(self) -> str:
        return self._name

    def peer_name(self) -> str:
        return str(self._peer.name())

    def __call__(self, greeting: str = "hi") -> str:
        return f"{greeting} from {self._name}"


def checkpoint_on_stop(path: str) -> None:
    """A PyNode whose stop handler writes a file slowly, while the node itself returns as
    soon as it sees the stop: the handler must have finished by then."""

    def handler() -> None:
        time.sleep(0.2)
        with open(path, "w") as f:
            f.write("saved")

    lp.register_stop_handler(handler)
    Path(path + ".ready").touch()  # the stopper waits for this: the handler is in place
    lp.wait_for_stop()


def stop_when_ready(paths: list[str]) -> None:
    """A PyNode that stops the program once every ``<path>.ready`` exists."""
    from topo.testing import wait_until

    wait_until(lambda: all(Path(p + ".ready").exists() for p in paths), 120, every=0.02)
    lp.stop()


class Terminated:
    """Acme's runtime terminator: a stop handler raises SystemExit in the node's thread."""

    def run(self) -> None:
        thread_id = threading.get_ident()

        def handler() -> None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread_id), ctypes.py_object(SystemExit)
            )

        lp.register_stop_handler(handler)
        while True:  # never looks at the stop event: only the SystemExit ends it
            time.sleep(0.01)


class BrokenInit:
    """A courier node whose constructor raises."""

    def __init__(self) -> None:
        raise KeyError("missing setting")


def pw_sleep() -> None:
    """program_wait: polls wait_for_stop."""
    while not lp.wait_for_stop(0.05):
        pass


def pw_wait_for_stop() -> None:
    lp.wait_for_stop()


def pw_stop_event() -> None:
    lp.stop_event().wait()


def pw_register_stop_handler() -> None:
    stop = threading.Event()
    lp.register_stop_handler(stop.set)
    stop.wait()


class Batched:
    """Acme's inference server: calls gathered into batches."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    @lp.batched_handler(batch_size=4, timeout=1000)
    def double(self, x: Any) -> Any:
        self.sizes.append(len(x))
        return np.asarray(x) * 2

    def batch_sizes(self) -> list[int]:
        return self.sizes


class BoundBatched(Batched):
    """Launchpad's batching example: the bound method batched in ``__init__``."""

    def __init__(self) -> None:
        super().__init__()
        self.triple = lp.batched_handler(batch_size=4, timeout=1000)(self.triple)

    def triple(self, x: Any) -> Any:
        self.sizes.append(len(x))
        return np.asarray(x) * 3


class Variables:
    """A variable source that counts how often it was asked."""

    def __init__(self) -> None:
        self.calls = 0

    def get_variables(self, names: list[str]) -> dict[str, int]:
        self.calls += 1
        return {n: len(n) for n in names}

    def count(self) -> int:
        return self.calls


class Typed:
    """Handles annotated as Launchpad's examples do: ``List[lp.CourierClient]``."""

    def __init__(self, peers: list[lp.CourierClient]) -> None:
        self.peers = peers

    def are_clients(self) -> list[bool]:
        return [isinstance(peer, lp.CourierClient) for peer in self.peers]

    def ask(self) -> list[str]:
        return [peer.ping() for peer in self.peers]
