"""A run's events on disk: ``<run_dir>/events.jsonl``, one JSON object per status event
(starting, started, ready, failed with its traceback, restarting, stopping, exited,
killed, snapshot, stalled, busy, stopped, and any kind added later), for the dashboard's
timeline and for whoever looks at the run afterwards.

Supervision never waits on the disk: the listener only puts the event in a bounded
queue (an event that finds it full is counted and said in the next line written), and a
thread of its own writes and flushes. The file is bounded too: past ``MAX_BYTES`` it is
renamed ``events.jsonl.1`` (replacing an older one) and a new one begins, so a run keeps
at most twice that. Log lines and metric updates are not events here (they have their
own files).
"""

from __future__ import annotations

import json
import os
import queue
import threading
from pathlib import Path
from typing import Any

from topo.backends.base import Event
from topo.rundir.layout import EVENTS_FILE, rotated_path

MAX_BYTES = 8 * 2**20
MAX_QUEUED = 10_000
MAX_TEXT = 32_000  # characters of one value (a traceback) kept in the file
SKIPPED = frozenset({"log", "metrics"})


def event_row(event: Event) -> dict[str, Any]:
    """The JSON object one event is written as."""
    row: dict[str, Any] = {"time": round(event.time, 3), "kind": event.kind}
    for key in ("node", "executable", "pid"):
        value = getattr(event, key)
        if value is not None:
            row[key] = value
    if event.message:
        row["message"] = event.message
    for key, value in event.data.items():
        if key not in row:
            row[key] = value[-MAX_TEXT:] if isinstance(value, str) else value
    return row


class EventLog:
    """A launcher listener that appends every status event to ``events.jsonl``."""

    def __init__(self, run_dir: Path, max_bytes: int = MAX_BYTES) -> None:
        self.path = run_dir / EVENTS_FILE
        self._max = max_bytes
        self._queue: queue.Queue[dict[str, Any] | None] = queue.Queue(MAX_QUEUED)
        self.lost = 0  # events that found the queue full
        self._thread = threading.Thread(target=self._write, name="topo-events", daemon=True)
        self._thread.start()

    def __call__(self, event: Event) -> None:
        """Take one event (any launcher thread): never blocks."""
        if event.kind in SKIPPED:
            return
        try:
            self._queue.put_nowait(event_row(event))
        except queue.Full:
            self.lost += 1

    def close(self, timeout: float = 2.0) -> None:
        """Write what is queued, then stop."""
        try:
            self._queue.put(None, timeout=timeout)
        except queue.Full:
            pass
        self._thread.join(timeout)

    def _write(self) -> None:
        f = self._open()
        written = f.tell() if f is not None else 0
        reported = 0
        while True:
            row = self._queue.get()
            if row is None:
                break
            if f is None:
                continue
            if self.lost > reported:
                row = {**row, "events_lost": self.lost}
                reported = self.lost
            line = json.dumps(row, default=str, separators=(",", ":")) + "\n"
            try:
                if written + len(line) > self._max and written:
                    f.close()
                    os.replace(self.path, rotated_path(self.path, 1))
                    f = self._open()
                    written = 0
                    if f is None:
                        continue
                f.write(line)
                written += len(line)
                if self._queue.empty():
                    f.flush()
            except OSError:
                continue  # a full disk: events are a record, never a reason to fail
        if f is not None:
            f.close()

    def _open(self) -> Any:
        try:
            return open(self.path, "a", encoding="utf-8")
        except OSError:
            return None
