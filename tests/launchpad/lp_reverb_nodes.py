"""Reverb targets of the topo.launchpad tests (apart from lp_nodes: importing reverb
loads TensorFlow, which only the reverb tests should pay for)."""

from __future__ import annotations

from typing import Any

import reverb

TABLE = "items"


def tables() -> list[reverb.Table]:
    """One prioritized table that can be sampled as soon as it holds an item."""
    return [
        reverb.Table(
            name=TABLE,
            sampler=reverb.selectors.Prioritized(1.0),
            remover=reverb.selectors.Fifo(),
            max_size=100,
            rate_limiter=reverb.rate_limiters.MinSize(1),
        )
    ]


class Inserter:
    """Given the replay's handle: what it became, and inserts and samples through it."""

    def __init__(self, replay: Any) -> None:
        self.replay = replay

    def what(self) -> str:
        return type(self.replay).__name__

    def insert(self, values: list[int]) -> int:
        for v in values:
            self.replay.insert([v], priorities={TABLE: 1.0})
        return len(values)

    def sample(self, n: int) -> list[int]:
        return [int(s[0].data[0]) for s in self.replay.sample(TABLE, num_samples=n)]

    def size(self) -> int:
        return int(self.replay.server_info()[TABLE].current_size)


def limited_tables() -> list[reverb.Table]:
    """A table whose rate limiter holds writers back after a few inserts (nobody samples),
    as an Acme replay's SampleToInsertRatio does before the learner starts."""
    limiter = reverb.rate_limiters.SampleToInsertRatio(
        samples_per_insert=8.0, min_size_to_sample=1, error_buffer=16.0
    )
    return [
        reverb.Table(
            name=TABLE,
            sampler=reverb.selectors.Uniform(),
            remover=reverb.selectors.Fifo(),
            max_size=1000,
            rate_limiter=limiter,
        )
    ]


class StepWriter:
    """Writes single steps with a trajectory writer, each item a squeezed (scalar) column
    as Acme's and Mava's adders write them, until the program stops."""

    def __init__(self, replay: Any) -> None:
        self.replay = replay
        self.written = 0

    def count(self) -> int:
        return self.written

    def run(self) -> None:
        import topo.launchpad as lp

        stop = lp.stop_event()
        with self.replay.trajectory_writer(num_keep_alive_refs=1) as writer:
            while not stop.is_set():
                writer.append({"step": self.written})
                writer.create_item(TABLE, 1.0, {"step": writer.history["step"][-1]})
                writer.flush(block_until_num_items=2)  # as Acme's adders: a few in flight
                self.written += 1
