"""Nodes for the ``topo top`` tests: a server whose calls take a few milliseconds and
clients that call it in a loop, logging their step count."""

from __future__ import annotations

import time
from typing import Any

import topo


class Server:
    def echo(self, value: int) -> int:
        time.sleep(0.002)
        return value


class Client:
    def __init__(self, server: Any) -> None:
        self.server = server
        self.log = topo.metrics.logger("client")

    def run(self) -> None:
        step = 0
        while not topo.stop_event().is_set():
            assert self.server.echo(step) == step
            step += 1
            if step % 20 == 0:
                self.log.write({"client_steps": step})
