"""Nodes of ``bench/ui_bench.py`` (kept light: the fork server imports it).

``Worker`` is a cheap courier node that does what a busy program's nodes do for a
dashboard: it prints a line and writes a ``topo.metrics`` row every ``every_s`` seconds,
and serves ``ping``, which its neighbour calls, so the page has logs, curves and call
figures to show.
"""

from __future__ import annotations

from typing import Any

import topo


class Worker:
    """Prints, logs a metric row and calls its peer every ``every_s`` seconds."""

    def __init__(self, index: int = 0, peer: Any = None, every_s: float = 1.0) -> None:
        self.index = index
        self.peer = peer
        self.every_s = every_s

    def ping(self) -> int:
        return self.index

    def run(self) -> None:
        log = topo.metrics.logger("worker")
        step = 0
        while not topo.wait_for_stop(self.every_s):
            step += 1
            if self.peer is not None:
                self.peer.ping()
            log.write({"step": step, "value": (step * 7919 + self.index) % 100 / 100})
            print(f"worker {self.index} step {step}", flush=True)
