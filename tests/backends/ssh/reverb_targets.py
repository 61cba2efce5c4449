"""Nodes for the reverb tests across hosts: an actor-like feeder and a learner-like
sampler, each on its own host, using the replay through its reverb.Client."""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import numpy as np
import reverb

import topo

TABLE = "uniform"


def make_tables() -> list[reverb.Table]:
    """One uniform table that can be sampled as soon as it holds an item."""
    return [
        reverb.Table(
            name=TABLE,
            sampler=reverb.selectors.Uniform(),
            remover=reverb.selectors.Fifo(),
            max_size=100_000,
            rate_limiter=reverb.rate_limiters.MinSize(1),
        )
    ]


class Feeder:
    """Writes one small item after another (values 0..999) until the stop; a broken
    connection (the replay restarted) gets a new writer."""

    def __init__(self, replay: Any) -> None:
        self._replay = replay
        self._count = 0

    def run(self) -> None:
        stop = topo.stop_event()
        while not stop.is_set():
            try:
                with self._replay.writer(max_sequence_length=1) as writer:
                    while not stop.is_set():
                        writer.append([np.float64(self._count % 1000)])
                        writer.create_item(TABLE, 1, 1.0)
                        self._count += 1
                        time.sleep(0.005)
            except Exception:
                time.sleep(0.2)

    def count(self) -> int:
        return self._count

    def host(self) -> str:
        return socket.gethostname()


class Sampler:
    """Samples batches, one every few milliseconds, until the stop: how many it got and
    the largest value seen (a forged 1e6 would show)."""

    def __init__(self, replay: Any) -> None:
        self._replay = replay
        self._count = 0
        self._largest = -1.0
        self._lock = threading.Lock()

    def run(self) -> None:
        stop = topo.stop_event()
        while not stop.is_set():
            try:
                got = [float(s[0].data[0]) for s in self._replay.sample(TABLE, num_samples=8)]
            except Exception:  # the replay restarted: sample again once it is back
                time.sleep(0.2)
                continue
            with self._lock:
                self._count += len(got)
                self._largest = max([self._largest, *got])
            time.sleep(0.005)  # a learner's pace, not a busy loop (it took a whole core)

    def count(self) -> int:
        return self._count

    def largest(self) -> float:
        return self._largest

    def size(self) -> int:
        return int(self._replay.server_info()[TABLE].current_size)

    def host(self) -> str:
        return socket.gethostname()

    def address(self) -> str:
        return str(self._replay.address())

    def pid(self) -> int:
        return os.getpid()


class Bystander:
    """A node on another host wired to the feeder only: it may not reach the replay,
    unless a node that holds the replay's handle passes it one."""

    def __init__(self, feeder: Any) -> None:
        self._feeder = feeder

    def try_replay(self, gateway: str) -> dict[str, str]:
        """Reverb's read through the replay's gateway with each right this process has
        (the feeder's token, none at all): what each attempt got."""
        from topo.runtime.client import present_right
        from topo.runtime.context import current_program
        from topo.runtime.entrance import Entrance
        from topo.runtime.handle import right_of

        program = current_program()
        results = {}
        for label, cap in (("feeder's token", right_of(self._feeder)), ("no token", None)):

            def secure(sock: Any, cap: str | None = cap) -> None:
                present_right(sock, program, "replay", cap)

            entrance = Entrance(secure, gateway)
            try:
                info = reverb.Client(entrance.address).server_info(timeout=5)
                results[label] = f"ok: {sorted(info)}"
            except Exception as exc:
                results[label] = f"{type(exc).__name__}"
            finally:
                entrance.close()
        return results

    def size_through(self, replay: Any) -> int:
        """The replay's table size through a handle received in this call."""
        from topo.kinds.clients import ReverbClient

        client = ReverbClient(replay.node_id, 30.0, replay)
        return int(client.server_info(timeout=30)[TABLE].current_size)
