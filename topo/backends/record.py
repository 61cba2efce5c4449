"""What a run leaves on disk while it runs, for the next look after a crash.

* ``status.json`` is rewritten (atomically, at most twice a second) whenever the
  status changes, not only at the end: if the launcher dies, the file still says
  which nodes were running and in what state.
* On the threads backend every node shares the launcher process, so a node that
  calls ``os._exit`` or crashes the interpreter takes the launcher with it. The
  crash record names the node that called ``os._exit`` and holds the
  ``faulthandler`` dump of every thread on a fatal signal (``crash.log``).
"""

from __future__ import annotations

import faulthandler
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

STATUS_FILE = "status.json"
CRASH_FILE = "crash.log"


def write_status(run_dir: Path, summary: dict[str, Any]) -> None:
    """Write ``status.json`` atomically (a reader never sees half a file)."""
    path = run_dir / STATUS_FILE
    tmp = path.with_name(f".{STATUS_FILE}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(summary, indent=2, default=str) + "\n")
    os.replace(tmp, path)


class StatusRecorder:
    """Rewrites ``status.json`` while the run goes on, when something changed."""

    def __init__(
        self, run_dir: Path, summary: Callable[[], dict[str, Any]], interval: float = 0.5
    ) -> None:
        self._run_dir = run_dir
        self._summary = summary
        self._interval = interval
        self._next = 0.0
        self.dirty = True

    def tick(self, now: float) -> None:
        """Write if the status changed and the last write is ``interval`` old."""
        if not self.dirty or now < self._next:
            return
        self.dirty = False
        self._next = now + self._interval
        try:
            write_status(self._run_dir, self._summary())
        except OSError:
            self.dirty = True  # try again next time


class CrashRecord:
    """Records, in ``crash.log``, the node that kills the shared process (threads backend)."""

    def __init__(
        self,
        run_dir: Path,
        node_of_thread: Callable[[], str | None],
        remove_on_exit: str | None = None,
    ) -> None:
        self.path = run_dir / CRASH_FILE
        self._node_of_thread = node_of_thread
        self._remove_on_exit = remove_on_exit  # the run's socket directory
        self._file: IO[str] | None = None
        self._real_exit: Callable[[int], Any] | None = None
        self._faulthandler_was: tuple[bool, Any] | None = None

    def install(self) -> None:
        """Hook ``os._exit`` and enable ``faulthandler`` into the crash log."""
        self._file = open(self.path, "a", buffering=1, encoding="utf-8")
        self._faulthandler_was = (faulthandler.is_enabled(), sys.stderr)
        faulthandler.enable(file=self._file, all_threads=True)
        real = self._real_exit = os._exit
        record = self

        def _exit(code: int) -> Any:
            record.note(
                f"node {record._node_of_thread() or '(unknown)'} called os._exit({code}) "
                f"in thread {threading.current_thread().name}; the launcher process "
                "ends with it (use --backend procs for code that may do this)"
            )
            if record._remove_on_exit:
                shutil.rmtree(record._remove_on_exit, ignore_errors=True)
            return real(code)

        os._exit = _exit  # type: ignore[assignment]

    def note(self, text: str) -> None:
        """Append a timestamped line to the crash log."""
        if self._file is not None:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S")
            self._file.write(f"{stamp} {text}\n")
            self._file.flush()
            os.fsync(self._file.fileno())

    def uninstall(self) -> None:
        """Restore ``os._exit`` and ``faulthandler``; drop an empty crash log."""
        if self._real_exit is not None:
            os._exit = self._real_exit  # type: ignore[assignment]
            self._real_exit = None
        if self._faulthandler_was is not None:
            enabled, stream = self._faulthandler_was
            faulthandler.disable()
            if enabled:
                try:
                    faulthandler.enable(file=stream, all_threads=True)
                except (ValueError, OSError, AttributeError):
                    pass
            self._faulthandler_was = None
        if self._file is not None:
            self._file.close()
            self._file = None
            if self.path.exists() and self.path.stat().st_size == 0:
                self.path.unlink()
