"""Sends a learner's new priorities to the Reverb table without slowing the learner and
without losing any: updates that arrive while one call is in flight are merged, the
latest priority of each key winning, and go out together in the next call."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

log = logging.getLogger("examples.agents.priorities")


class PrioritySender:
    """A daemon thread calling ``mutate(table=table, updates={key: priority})`` with
    everything handed to :meth:`send` since its previous call (the thread must not hold
    the process's exit: a call to a replay that went away may block for ever).

    ``sent_keys`` counts the keys sent, ``superseded`` those whose priority was replaced by
    a newer one for the same key before it went out; nothing is dropped."""

    def __init__(
        self, mutate: Callable[..., Any], table: str, stop: threading.Event | None = None
    ) -> None:
        self._mutate = mutate
        self._table = table
        self._stop = stop or threading.Event()
        self._pending: dict[int, float] = {}
        self._ready = threading.Condition()
        self._closed = False
        self._failed = False
        self._busy = False
        self.calls = 0
        self.sent_keys = 0
        self.superseded = 0
        self._thread = threading.Thread(target=self._loop, name="dqn-priorities", daemon=True)
        self._thread.start()

    def send(self, updates: Mapping[int, float]) -> None:
        """Queue ``updates``; returns at once."""
        with self._ready:
            if self._failed:  # the replay is gone (the program is stopping)
                return
            before = len(self._pending)
            self._pending.update(updates)
            self.superseded += before + len(updates) - len(self._pending)
            self._ready.notify()

    def close(self) -> None:
        """Send what is pending, then end the thread (it is not waited for)."""
        with self._ready:
            self._closed = True
            self._ready.notify()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until everything queued so far has been sent; False after ``timeout``."""
        with self._ready:
            return self._ready.wait_for(lambda: not self._pending and not self._busy, timeout)

    @property
    def pending(self) -> int:
        """Keys waiting to go out."""
        with self._ready:
            return len(self._pending)

    def _loop(self) -> None:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: self._pending or self._closed)
                if not self._pending:
                    return
                updates, self._pending = self._pending, {}
                self._busy = True
            try:
                self._mutate(table=self._table, updates=updates)
            except Exception as exc:  # the replay went away: priorities stay as they are
                if not self._stop.is_set():
                    log.warning("learner: priority updates stopped: %r", exc)
                with self._ready:
                    self._busy, self._failed = False, True
                    self._ready.notify_all()
                return
            with self._ready:
                self.calls += 1
                self.sent_keys += len(updates)
                self._busy = False
                self._ready.notify_all()
