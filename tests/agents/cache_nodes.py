"""Nodes for the cacher test: a trainer that counts and time-stamps its variables, and
executors that ask for variables as fast as they can."""

from __future__ import annotations

import threading
import time
from typing import Any

import topo


class CountingTrainer:
    """Answers ``get_variables`` with a version and the time it was made; counts calls."""

    def __init__(self) -> None:
        self.calls = 0
        self._lock = threading.Lock()

    def get_variables(self, names: list[str]) -> list[dict[str, float]]:
        with self._lock:
            self.calls += 1
            version = self.calls
        return [{"version": version, "made": time.time()} for _ in names]

    def get_calls(self) -> int:
        return self.calls


class Poller:
    """Asks its variable source for variables in a loop until the program stops and
    records how old the answers were."""

    def __init__(self, variable_source: Any, executor_id: int = 0) -> None:
        self._source = variable_source
        self.requests = 0
        self.max_age_s = 0.0
        self.versions: set[float] = set()

    def run(self) -> None:
        while not topo.stop_event().is_set():
            value = self._source.get_variables(["policy"])[0]
            self.max_age_s = max(self.max_age_s, time.time() - value["made"])
            self.versions.add(value["version"])
            self.requests += 1

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "max_age_s": self.max_age_s,
            "versions": len(self.versions),
        }
