"""Targets for the reverb tests: a tables factory and a node that uses a reverb.Client."""

from __future__ import annotations

from typing import Any

import reverb

from topo.nodes.reverb import ReverbServer

TABLE = "uniform"


def _uniform_table(rate_limiter: Any) -> list[reverb.Table]:
    return [
        reverb.Table(
            name=TABLE,
            sampler=reverb.selectors.Uniform(),
            remover=reverb.selectors.Fifo(),
            max_size=1000,
            rate_limiter=rate_limiter,
        )
    ]


def make_tables() -> list[reverb.Table]:
    """One uniform table of 1000 items that can be sampled as soon as it holds one."""
    return _uniform_table(reverb.rate_limiters.MinSize(1))


def not_tables() -> list[int]:
    return [1, 2]


class User:
    """Holds the reference to the replay (a reverb.Client) and uses it when called."""

    def __init__(self, replay: Any) -> None:
        self.replay = replay

    def insert(self, values: list[int]) -> int:
        for v in values:
            self.replay.insert([v], priorities={TABLE: 1.0})
        return len(values)

    def sample(self, n: int) -> list[int]:
        return [int(s[0].data[0]) for s in self.replay.sample(TABLE, num_samples=n)]

    def size(self) -> int:
        return int(self.replay.server_info()[TABLE].current_size)

    def reconnect(self) -> str:
        self.replay.reconnect()
        return str(self.replay.address())


def make_limited_tables() -> list[reverb.Table]:
    """A table whose rate limiter holds writers back after a few inserts (nobody samples)."""
    return _uniform_table(
        reverb.rate_limiters.SampleToInsertRatio(
            samples_per_insert=8.0, min_size_to_sample=1, error_buffer=16.0
        )
    )


class Writer:
    """Inserts until the program stops, with the legacy writer an Acme actor uses; a rate
    limiter soon holds it inside Reverb."""

    def __init__(self, replay: Any) -> None:
        self.replay = replay
        self.inserted = 0

    def count(self) -> int:
        return self.inserted

    def run(self) -> None:
        import topo

        stop = topo.stop_event()
        with self.replay.writer(max_sequence_length=1) as writer:
            while not stop.is_set():
                writer.append([self.inserted])
                writer.create_item(TABLE, 1, 1.0)
                self.inserted += 1


class UnisolatedReverb(ReverbServer):
    """A reverb node on a host where no network namespace can be made (simulated): the
    server falls back to listening on the host, and says so."""

    def __init__(self, **kwargs: Any) -> None:
        import topo.runtime.isolation as isolation

        isolation.isolate = lambda: "namespaces are off in this test"  # the forked child's
        super().__init__(**kwargs)
