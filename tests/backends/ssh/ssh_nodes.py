"""Nodes for the ssh backend's tests: they tell where they run."""

from __future__ import annotations

import os
import socket
import tempfile
import time

import topo


class Where:
    """A courier node that reports its host (each test host has its own hostname)."""

    def where(self) -> dict[str, object]:
        return {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "module": __file__,
            "mark": os.environ.get("TOPO_TEST_MARK"),
            "tmp": tempfile.gettempdir(),
            "cwd": os.getcwd(),
        }

    def devices(self) -> dict[str, str | None]:
        """What its process was told of the accelerators it may open."""
        return {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "JAX_PLATFORMS")}

    def echo(self, value: object) -> object:
        return value


class Asker:
    """Asks every ``peers`` node where it runs, prints it and stops the program."""

    def __init__(self, peers: list[topo.Handle]) -> None:
        self._peers = peers

    def run(self) -> None:
        for peer in self._peers:
            print("peer at", peer.where()["host"], flush=True)
        time.sleep(0.2)
