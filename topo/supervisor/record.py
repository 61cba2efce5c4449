"""What a run leaves on disk while it runs, for the next look after a crash.

* ``status.json`` (``topo.rundir.status``) is rewritten (at most twice a second) whenever the
  status changes, not only at the end: if the launcher dies, the file still says
  which nodes were running and in what state. A change of state (a node ready, failed,
  restarting; not new metric figures) is written sooner, at most ``URGENT_S`` after the
  previous write, so that a reader (the dashboard) shows it within a second.
* It is also rewritten every ``HEARTBEAT_S`` seconds when nothing changed: with the
  launcher's pid and start time in it, a reader tells a live run from a lost one.
* ``crash.log`` (threads backend) is written by ``topo.backends.crash``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from topo.rundir.status import write_status

HEARTBEAT_S = 2.0
URGENT_S = 0.1  # a state change waits at most this long after the last write


class StatusRecorder:
    """Rewrites ``status.json`` while the run goes on, when something changed."""

    def __init__(
        self, run_dir: Path, summary: Callable[[], dict[str, Any]], interval: float = 0.5
    ) -> None:
        self._run_dir = run_dir
        self._summary = summary
        self._interval = interval
        self._next = 0.0
        self._soon = 0.0
        self._beat = 0.0
        self.dirty = True
        self.urgent = False  # a change of state: written at most URGENT_S after the last

    def tick(self, now: float) -> None:
        """Write if the status changed and the last write is ``interval`` old (a change of
        state: ``URGENT_S`` old), or if the last write is ``HEARTBEAT_S`` old."""
        due = (self.dirty and now >= self._next) or (self.urgent and now >= self._soon)
        if not due and now < self._beat:
            return
        self.dirty = self.urgent = False
        self._next = now + self._interval
        self._soon = now + URGENT_S
        self._beat = now + HEARTBEAT_S
        try:
            write_status(self._run_dir, self._summary())
        except OSError:
            self.dirty = True  # try again next time
