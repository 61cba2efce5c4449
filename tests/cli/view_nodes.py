"""Nodes for the live-view tests: one that idles until the stop, one slow to stop."""

from __future__ import annotations

import time

from topo.runtime import lifecycle


class Idle:
    """Says hello, then waits for the program's stop."""

    def __init__(self, line: str = "idle and well") -> None:
        self.line = line

    def run(self) -> None:
        print(self.line, flush=True)
        lifecycle.wait_for_stop()


class SlowToStop:
    """Ignores the stop for ``seconds`` (so the grace period runs, and shows)."""

    def __init__(self, seconds: float = 30.0) -> None:
        self.seconds = seconds

    def run(self) -> None:
        print("up; will be slow to stop", flush=True)
        lifecycle.wait_for_stop()
        time.sleep(self.seconds)
