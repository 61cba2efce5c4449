"""Launchpad's consumer_producers, written as Launchpad users write it. Run it with::

    python -m examples.launchpad.consumer_producers --lp_launch_type=local_mp

(``local_mt``, the default, runs it as threads) or turn it into
``examples/topologies/consumer_producers.yaml`` with::

    topo export examples.launchpad.consumer_producers:make_program -o agent.yaml
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import topo.launchpad as lp


class Producer:
    """Does a little CPU work when asked."""

    def work(self, context: int) -> int:
        return sum(i * i for i in range(1000 + context)) % 997


class Consumer:
    """Hands work out to every producer with futures, then stops the program."""

    def __init__(
        self, producers: Sequence[Any], stop_fn: Callable[[], None], work_items: int = 8
    ) -> None:
        self._producers = producers
        self._stop_program = stop_fn
        self._work_items = work_items
        self.result: int | None = None

    def run(self) -> None:
        futures = [
            self._producers[i % len(self._producers)].futures.work(i)
            for i in range(self._work_items)
        ]
        self.result = sum(f.result() for f in futures)
        print(f"{self._work_items} results from {len(self._producers)} producers: {self.result}")
        self._stop_program()


def make_program(num_producers: int = 4) -> lp.Program:
    """Define the distributed program topology."""
    program = lp.Program("consumer_producers")
    # Use `program.group()` to group homogeneous nodes.
    with program.group("producer"):
        producers = [program.add_node(lp.CourierNode(Producer)) for _ in range(num_producers)]
    # A single consumer connected to the list of producers; `label` makes a group of one.
    # (The seed passes FLAGS.lp_launch_type to make_program_stopper; topo needs none.)
    node = lp.CourierNode(Consumer, producers=producers, stop_fn=lp.make_program_stopper())
    program.add_node(node, label="consumer")
    return program


if __name__ == "__main__":
    lp.launch(make_program())  # launch type from --lp_launch_type (default local_mt)
