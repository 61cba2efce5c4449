"""StepsLimiter: stops the program once a counter key exceeds ``max_steps`` (as Acme's does)."""

from __future__ import annotations

import logging
from typing import Any

from topo.runtime import lifecycle

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

    def run(self) -> None:
        """Poll until the limit is reached (then stop the program) or the program stops."""

        while True:
            self.steps_seen = int(self._counter.get_counts().get(self._steps_key, 0))
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
