"""A node for the operate-runs tests: prints a numbered tick every ``every`` seconds
until the program stops (or fails at start when ``fail`` is set)."""

from __future__ import annotations

import topo


class Ticker:
    def __init__(self, name: str = "tick", every: float = 0.2, fail: bool = False) -> None:
        if fail:
            raise RuntimeError(f"{name} refuses to start")
        self.name, self.every = name, every

    def run(self) -> None:
        i = 0
        while not topo.wait_for_stop(self.every):
            print(f"{self.name} tick {i}", flush=True)
            i += 1
