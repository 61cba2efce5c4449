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
