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


QUEUE = "queue"


def make_state_tables() -> list[reverb.Table]:
    """The uniform table and a queue beside it (reading the queue gives back every item
    once, in order)."""
    return [*make_tables(), reverb.Table.queue(QUEUE, 1000)]


class QueueUser(User):
    """Inserts each value into both tables; takes items back from the queue. A replay
    node of a class of its own (not ``kind: reverb``) comes as a topo Handle: made a
    reverb.Client here as the kind would."""

    def __init__(self, replay: Any) -> None:
        from topo.kinds.clients import ReverbClient

        if not isinstance(replay, ReverbClient):
            replay = ReverbClient("replay", 60.0, handle=replay)
        super().__init__(replay)

    def insert(self, values: list[int]) -> int:
        for v in values:
            self.replay.insert([v], priorities={TABLE: 1.0, QUEUE: 1.0})
        return len(values)

    def sizes(self) -> dict[str, int]:
        return {k: int(v.current_size) for k, v in self.replay.server_info().items()}

    def take(self, n: int) -> list[int]:
        return [int(s[0].data[0]) for s in self.replay.sample(QUEUE, num_samples=n)]


class RestoredReverb(ReverbServer):
    """A reverb node given a saved state, restored right after it is made (as topo does
    on resume); ``isolate=False`` simulates a host without network namespaces."""

    def __init__(self, state_file: str, isolate: bool = True, **kwargs: Any) -> None:
        from pathlib import Path

        if not isolate:
            import topo.runtime.isolation as isolation

            isolation.isolate = lambda: "namespaces are off in this test"  # the forked child's
        super().__init__(**kwargs)
        self.restore(Path(state_file).read_bytes())


class Pacer:
    """Inserts one item per step, passing topo's pause point between steps (an actor's
    loop as a snapshot wants it); ``inserted`` is its own count of what it inserted."""

    def __init__(self, replay: Any) -> None:
        self.replay = replay
        self.inserted = 0

    def count(self) -> int:
        return self.inserted

    def run(self) -> None:
        import topo

        stop = topo.stop_event()
        while not stop.is_set():
            topo.pausepoint()
            self.replay.insert([self.inserted], priorities={TABLE: 1.0, QUEUE: 1.0})
            self.inserted += 1


class SavingPacer(Pacer):
    """A Pacer that keeps its count in snapshots (``save``/``restore``): a snapshot holds
    it at its pause point, so its saved count is what the replay's saved tables hold."""

    def save(self) -> int:
        return self.inserted

    def restore(self, state: int) -> None:
        self.inserted = int(state)
