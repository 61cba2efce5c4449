"""Launchpad's consumer_producers example as topo nodes.

``examples/topologies/consumer_producers.yaml`` wires ``count`` producers to one
consumer. Each producer does real CPU work on request; the consumer's ``run()``
fans the work out to all producers with futures, collects the results, prints
them and returns, which stops the program (``stops_program: true``).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

import topo
from topo.runtime import Handle


class Producer:
    """Does CPU work (iterated SHA-256) when asked."""

    def __init__(self, producer_id: int = 0, rounds: int = 20_000) -> None:
        self.producer_id = producer_id
        self.rounds = rounds
        self.done = 0

    def work(self, context: int) -> int:
        """Hash ``context`` ``rounds`` times; return a small integer digest of the result."""
        digest = f"{self.producer_id}:{context}".encode()
        for _ in range(self.rounds):
            digest = hashlib.sha256(digest).digest()
        self.done += 1
        return int.from_bytes(digest[:2], "big")

    def stats(self) -> dict[str, int]:
        """How many work items this producer has done."""
        return {"producer_id": self.producer_id, "done": self.done}


class Consumer:
    """Hands ``work_items`` items out round-robin to ``producers`` and sums the results."""

    def __init__(self, producers: Sequence[Handle], work_items: int = 32) -> None:
        self.producers = list(producers)
        self.work_items = work_items
        self.result: int | None = None

    def run(self) -> None:
        """Fan out, collect, print the result; returning stops the program."""
        if not self.producers:
            raise ValueError("the consumer needs at least one producer")
        start = time.perf_counter()
        futures: list[Future[int]] = [
            self.producers[i % len(self.producers)].futures.work(i) for i in range(self.work_items)
        ]
        stop = topo.stop_event()
        results = [_result_unless_stopped(f, stop) for f in futures]
        if stop.is_set() and None in results:  # stopped from outside: nothing to sum
            print(f"{topo.current_node().id}: stopped before every result came", flush=True)
            return
        self.result = sum(r for r in results if r is not None)
        elapsed = time.perf_counter() - start
        node = topo.current_node().id
        print(
            f"{node}: {len(results)} results from {len(self.producers)} producers "
            f"in {elapsed:.2f}s, sum = {self.result}",
            flush=True,
        )

    def get_result(self) -> int | None:
        """The sum once ``run()`` has finished (for tests)."""
        return self.result


def _result_unless_stopped(future: Future[int], stop: threading.Event) -> int | None:
    """The future's result, or None once the program stops first (a producer that
    stopped before answering would otherwise hold the consumer past the grace period)."""
    while True:
        try:
            return future.result(timeout=0.1)
        except FutureTimeout:
            if stop.is_set():
                return None
