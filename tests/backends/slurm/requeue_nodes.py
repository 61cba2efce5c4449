"""A node with a state for the requeue tests: it counts, keeps its count and how many
times it was brought back (``save``/``restore``), and ends once brought back ``need``
times and a few counts further. Whether a run resumed is read from its state, not
from timing."""

from __future__ import annotations

from typing import Any

from topo import pausepoint, stop_event

MORE = 3  # counts after its last restore before it ends


class Lives:
    """Counts every ``every`` seconds until brought back ``need`` times (then ``MORE``)."""

    def __init__(self, need: int = 1, every: float = 0.2) -> None:
        self.need, self.every = need, every
        self.count = 0
        self.lives = 0
        self.since = 0  # counts since this start

    def run(self) -> None:
        while not stop_event().wait(self.every):
            pausepoint()
            self.count += 1
            self.since += 1
            print(f"count {self.count} lives {self.lives}", flush=True)
            if self.lives >= self.need and self.since >= MORE:
                print(f"done count {self.count} lives {self.lives}", flush=True)
                return

    def save(self) -> dict[str, Any]:
        print(f"saved count {self.count} lives {self.lives}", flush=True)
        return {"count": self.count, "lives": self.lives}

    def restore(self, state: dict[str, Any]) -> None:
        self.count, self.lives = int(state["count"]), int(state["lives"]) + 1
        print(f"restored count {self.count} lives {self.lives}", flush=True)
