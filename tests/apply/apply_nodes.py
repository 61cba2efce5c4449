"""Nodes for the ``topo apply`` tests: workers in a group, and a caller looping over a
handle to the whole group that keeps count of every call and every error."""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import topo


class Worker:
    """Answers ``work(x)`` with who it is: its replica, its tag and its process."""

    def __init__(self, worker_id: int, tag: str = "v1", delay_s: float = 0.0) -> None:
        self.worker_id = worker_id
        self.tag = tag
        self.delay_s = delay_s
        print(f"worker {worker_id} ({tag}) up", flush=True)

    def work(self, x: int) -> dict[str, Any]:
        if self.delay_s:
            time.sleep(self.delay_s)
        return {"id": self.worker_id, "tag": self.tag, "pid": os.getpid(), "x": x}

    def pid(self) -> int:
        return os.getpid()


class Caller:
    """Calls every member of ``workers`` in turn, for ever; ``stats()`` says how many
    calls went through, which errors it saw, and the members it holds now."""

    def __init__(self, workers: list[Any], pause_s: float = 0.002) -> None:
        self.workers = workers
        self.pause_s = pause_s
        self.calls = 0
        self.errors: list[str] = []
        self.answered: dict[str, int] = {}  # node id -> calls it answered
        self._lock = threading.Lock()

    def run(self) -> None:
        stop = topo.stop_event()
        while not stop.is_set():
            for worker in list(self.workers):
                if stop.is_set():
                    return
                try:
                    worker.work(self.calls)
                    with self._lock:
                        self.calls += 1
                        self.answered[worker.node_id] = self.answered.get(worker.node_id, 0) + 1
                except Exception as exc:
                    if stop.is_set():
                        return
                    with self._lock:
                        self.errors.append(f"{worker.node_id}: {type(exc).__name__}: {exc}")
            time.sleep(self.pause_s)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            return {
                "calls": self.calls,
                "errors": list(self.errors),
                "members": [w.node_id for w in self.workers],
                "answered": dict(self.answered),
                "pid": os.getpid(),
            }

    def pid(self) -> int:
        return os.getpid()


class Broken:
    """A node that cannot start: its constructor raises."""

    def __init__(self, why: str = "broken on purpose") -> None:
        raise RuntimeError(why)


class Tally:
    """A node with a state (``save``/``restore``): a count that ``add()`` raises by
    ``step``; ``count()`` says where it is."""

    def __init__(self, step: int = 1) -> None:
        self.step = step
        self.total = 0

    def add(self) -> int:
        self.total += self.step
        return self.total

    def count(self) -> int:
        return self.total

    def save(self) -> dict[str, int]:
        return {"total": self.total}

    def restore(self, state: dict[str, int]) -> None:
        self.total = int(state["total"])
