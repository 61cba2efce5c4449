"""A variable source for the actor freshness test: every answer is a new version of a
Q-network whose parameters carry that version, and the source notes when each version
was asked for."""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

HIDDEN = 8


class TaggedSource:
    """Answers ``get_variables`` with version ``n`` (the n-th call): an MLP with zero
    weights whose output bias is ``[n, 0]``, so its Q-values are ``[n, 0]`` whatever the
    observation: the layers an actor acts with tell which version it holds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._asked: list[float] = []  # monotonic time each version was asked for

    def get_variables(self, names: list[str]) -> list[Any]:
        with self._lock:
            self._asked.append(time.monotonic())
            version = len(self._asked)
        params = {
            "mlp/~/linear_0": {
                "w": np.zeros((4, HIDDEN), np.float32),
                "b": np.zeros(HIDDEN, np.float32),
            },
            "mlp/~/linear_1": {
                "w": np.zeros((HIDDEN, 2), np.float32),
                "b": np.array([version, 0.0], np.float32),
            },
        }
        return [params for _ in names]

    def asked(self) -> list[float]:
        """When each version was asked for (version ``n`` at index ``n - 1``)."""
        with self._lock:
            return list(self._asked)
