"""Node classes served by the runtime tests (in child processes)."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import numpy as np

import topo
from topo.runtime import Handle, handles

_busy = [0, 0]  # running now, most at once
_busy_lock = threading.Lock()


class Echo:
    def echo(self, x: Any) -> Any:
        return x

    def add(self, a: Any, b: Any = 0) -> Any:
        return a + b

    def boom(self, msg: str) -> None:
        raise ValueError(msg)

    def weird(self) -> None:
        class LocalOnly(Exception):
            pass

        raise LocalOnly("not importable")

    def whoami(self) -> tuple[str, str, int, int]:
        node = topo.current_node()
        return node.id, node.group, node.replica, os.getpid()

    def sleep(self, seconds: float) -> float:
        time.sleep(seconds)
        return seconds

    def busy(self, seconds: float) -> int:
        """Sleep while counting how many calls run at once; returns the highest count."""
        with _busy_lock:
            _busy[0] += 1
            _busy[1] = max(_busy[1], _busy[0])
        time.sleep(seconds)
        with _busy_lock:
            _busy[0] -= 1
            return _busy[1]

    def threads(self) -> int:
        """Handler threads this node's process runs."""
        return sum(1 for t in threading.enumerate() if t.name.startswith("topo-h-"))

    def call_peers(self, peers: list[Handle], method: str) -> list[Any]:
        return [getattr(p, method)() for p in peers]

    def call_ids(self, node_ids: list[str]) -> list[Any]:
        return [h.whoami() for h in handles(node_ids)]

    def stop_from_thread(self) -> None:
        threading.Thread(target=topo.stop, args=("stopped by test node",)).start()

    def __call__(self, x: Any) -> Any:
        return ("called", x)


class Batched:
    def __init__(self) -> None:
        self.sizes: list[int] = []

    @topo.batched(batch_size=8, timeout_ms=300)
    def policy(self, obs: np.ndarray, scale: np.ndarray) -> dict[str, np.ndarray]:
        self.sizes.append(len(obs))
        return {"y": obs * scale, "n": np.full(len(obs), len(obs))}

    def max_batch(self) -> int:
        return max(self.sizes, default=0)


class Runner:
    """Has run(): serves while run() runs, stops when the program stops."""

    def run(self) -> None:
        topo.wait_for_stop()

    def ping(self) -> str:
        return "pong"
