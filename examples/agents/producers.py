"""Launchpad's consumer_producers example as topo nodes.

``examples/topologies/consumer_producers.yaml`` wires ``count`` producers to one
consumer. Each producer does real CPU work on request; the consumer's ``run()``
fans the work out to all producers with futures, collects the results, prints
them and returns, which stops the program (``stops_program: true``).

Snapshots (issue 29): the consumer saves the results it has collected, so a resumed
consumer asks only for the rest; its wait for each result is pausable and it passes a
pause point between results. A producer keeps nothing (see :class:`Producer`).
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
    """Does CPU work (iterated SHA-256) when asked.

    No ``save``/``restore`` and no pause points: it has no loop of its own (it works in
    the RPC calls it serves, which a snapshot does not hold) and no state worth keeping
    (a work item's result depends on its arguments only; ``done`` is a statistic)."""

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
    """Hands ``work_items`` items out round-robin to ``producers`` and sums the results.
    ``save()`` is the results collected so far (by item); a restored consumer asks the
    producers only for the others."""

    def __init__(self, producers: Sequence[Handle], work_items: int = 32) -> None:
        self.producers = list(producers)
        self.work_items = work_items
        self.result: int | None = None
        self._results: dict[int, int] = {}  # item -> its result, as collected

    def save(self) -> dict[str, dict[int, int]]:
        """The results collected so far, by work item."""
        return {"results": dict(self._results)}

    def restore(self, state: dict[str, dict[int, int]]) -> None:
        """Take the results a saved consumer had collected (before ``run``)."""
        self._results = {int(k): int(v) for k, v in state["results"].items()}

    def run(self) -> None:
        """Fan out, collect, print the result; returning stops the program."""
        if not self.producers:
            raise ValueError("the consumer needs at least one producer")
        start = time.perf_counter()
        stop = topo.stop_event()
        futures: dict[int, Future[int]] = {}
        for i in range(self.work_items):
            if stop.is_set():  # many items take a while to send: a stop is seen meanwhile
                return self._stopped()
            if i not in self._results:
                futures[i] = self.producers[i % len(self.producers)].futures.work(i)
        for i, future in futures.items():
            topo.pausepoint()
            with topo.pausable():  # a producer's work: nothing here changes meanwhile
                value = _result_unless_stopped(future, stop)
            if value is None:  # stopped from outside: nothing to sum
                return self._stopped()
            self._results[i] = value
        results = [self._results[i] for i in range(self.work_items)]
        self.result = sum(results)
        elapsed = time.perf_counter() - start
        node = topo.current_node().id
        print(
            f"{node}: {len(results)} results from {len(self.producers)} producers "
            f"in {elapsed:.2f}s, sum = {self.result}",
            flush=True,
        )

    def _stopped(self) -> None:
        print(f"{topo.current_node().id}: stopped before every result came", flush=True)

    def get_result(self) -> int | None:
        """The sum once ``run()`` has finished (for tests)."""
        return self.result


def _result_unless_stopped(future: Future[int], stop: threading.Event) -> int | None:
    """The future's result, or None once the program stops first (a producer that
    stopped before answering would otherwise hold the consumer past the grace period).
    A call that failed by its deadline raises: its ``DeadlineExceeded`` is a
    ``TimeoutError`` too, and taken for the poll's it made this loop spin, re-raising the
    same exception (whose traceback grew each time: gigabytes under load)."""
    while True:
        try:
            return future.result(timeout=0.1)
        except FutureTimeout:
            if future.done():
                raise
            if stop.is_set():
                return None
