"""StepsLimiter: stops the program once a counter key exceeds ``max_steps`` (as Acme's does).

Each poll it also writes its progress as metrics (``limit_key``, the key's count,
``limit`` and ``eta_s``), so ``topo run`` shows ``actor_steps 47.1k/50k · ~20 s``.

It has no state of its own to snapshot (no ``save``/``restore``): the steps live in the
counter, which is restored on resume, so a run resumed at 60 % stops at the same
``max_steps`` as one never interrupted. Its ETA baseline (recent polls, timed on this
process's monotonic clock) would mean nothing in another process; a resumed limiter
estimates again from its own polls."""

from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any

from topo.runtime import lifecycle, metrics

log = logging.getLogger("topo.nodes.limiter")


class StepsLimiter:
    """Polls ``counter.get_counts()[steps_key]`` and calls ``topo.stop()`` once it is greater
    than ``max_steps`` — the comparison of Acme's ``lp_utils.StepsLimiter``, so a program
    ported from Acme runs exactly as many steps as it did there."""

    def __init__(
        self, counter: Any, max_steps: int, steps_key: str = "actor_steps", poll_s: float = 1.0
    ) -> None:
        if max_steps < 0:
            raise ValueError(f"max_steps must be ≥ 0, got {max_steps}")
        self._counter = counter
        self._max_steps = max_steps
        self._steps_key = steps_key
        self._poll_s = poll_s
        self.steps_seen = 0
        self._seen: deque[tuple[float, int]] = deque(maxlen=30)  # (time, count) of recent polls
        self._metrics = metrics.logger("limiter")

    def run(self) -> None:
        """Poll until the limit is reached (then stop the program) or the program stops."""

        while True:
            self.steps_seen = int(self._counter.get_counts().get(self._steps_key, 0))
            self._report()
            if self.steps_seen > self._max_steps:
                log.info(
                    "%s reached %d, over the limit of %d: stopping the program",
                    self._steps_key,
                    self.steps_seen,
                    self._max_steps,
                )
                lifecycle.stop(
                    f"{self._steps_key} reached {self.steps_seen}, over {self._max_steps}"
                )
                return
            if lifecycle.wait_for_stop(self._poll_s):
                return

    def eta_s(self) -> float | None:
        """Seconds until the limit at the rate of the recent polls (None: no progress)."""
        if len(self._seen) < 2:
            return None
        (t0, s0), (t1, s1) = self._seen[0], self._seen[-1]
        if s1 <= s0 or t1 <= t0:
            return None
        return max(self._max_steps + 1 - s1, 0) / ((s1 - s0) / (t1 - t0))

    def _report(self) -> None:
        """The progress towards the limit, as metrics for the live view."""
        self._seen.append((time.monotonic(), self.steps_seen))
        eta = self.eta_s()
        self._metrics.write(
            {
                "limit_key": self._steps_key,
                self._steps_key: self.steps_seen,
                "limit": self._max_steps,
                "eta_s": None if eta is None else round(eta, 1),
            }
        )
