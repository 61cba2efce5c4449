"""A node that ignores the stop: only a kill ends it."""

from __future__ import annotations

import time


class Deaf:
    def run(self) -> None:
        while True:
            time.sleep(0.1)
