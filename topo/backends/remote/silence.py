"""How long the far end of a link has been silent, as far as this process can tell.

A lease is broken when nothing is heard for ``lease_s``. On a busy machine the process
that keeps the lease may itself not run for seconds (two cores shared by dozens of
processes, a library holding the GIL through a long import): when its check then comes
late, what the far end said meanwhile may still be unread in a pipe, behind the check.
A late check therefore does not count; the reader gets its turn, and the next check on
time decides. A far end that is really gone is found one check later.
"""

from __future__ import annotations

import time


class Silence:
    """The silence of a link checked every ``every_s`` seconds against ``lease_s``."""

    def __init__(self, lease_s: float, every_s: float) -> None:
        self.lease_s = lease_s
        self.every_s = every_s
        self.last_heard = time.monotonic()
        self.heard_once = False  # the lease applies once the far end has said something
        self._checked = self.last_heard

    def heard(self) -> None:
        """The far end said something."""
        self.last_heard = time.monotonic()
        self.heard_once = True

    def check(self) -> float | None:
        """Seconds of silence past the lease, counted only on a check made on time (None:
        not broken, or this check came late)."""
        now = time.monotonic()
        late = now - self._checked > 2 * self.every_s + 0.5
        self._checked = now
        if late:
            return None
        silent = now - self.last_heard
        return silent if silent > self.lease_s else None
