"""The crash log of the threads backend: which node took the shared process down.

A node that calls ``os._exit`` or crashes the interpreter ends the launcher with it on
threads; this leaves ``crash.log`` in the run directory naming the node.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from topo.rundir.layout import CRASH_LOG


class CrashRecord:
    """Records, in ``crash.log``, the node that kills the shared process (threads backend)."""

    def __init__(
        self,
        run_dir: Path,
        node_of_thread: Callable[[], str | None],
        remove_on_exit: str | None = None,
        before_exit: Callable[[], None] | None = None,
    ) -> None:
        self.path = run_dir / CRASH_LOG
        self._node_of_thread = node_of_thread
        self._remove_on_exit = remove_on_exit  # the run's socket directory
        self._before_exit = before_exit  # e.g. end the processes the nodes started
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
        launcher = os.getpid()

        def _exit(code: int) -> Any:
            if os.getpid() != launcher:  # a forked child (multiprocessing) ends: not the run
                return real(code)
            record.note(
                f"node {record._node_of_thread() or '(unknown)'} called os._exit({code}) "
                f"in thread {threading.current_thread().name}; the launcher process "
                "ends with it (use --backend procs for code that may do this)"
            )
            if record._before_exit is not None:
                try:
                    record._before_exit()
                except Exception as exc:
                    record.note(f"could not end the nodes' processes: {exc!r}")
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
