"""Nodes for the ``breakpoint()`` tests: one that stops at a breakpoint in its loop and,
once let go, says what its local became and waits for the program's stop."""

from __future__ import annotations

import topo


class Stopper:
    def run(self) -> None:
        value = 41
        breakpoint()
        value += 1
        print(f"after the breakpoint: {value}", flush=True)
        topo.wait_for_stop()


class Plain:
    def run(self) -> None:
        topo.wait_for_stop()
