"""Ctrl-C and SIGTERM heard without a lock in the signal handler.

Python runs a signal handler in the main thread between two bytecodes, wherever that
thread is, even inside ``threading.Event.wait`` holding the event's lock or inside a
``queue.Queue.put``: a handler that sets an event or puts on a queue can then wait for
ever on a lock its own thread holds (python/cpython#126434 discusses the hazard). Here
the handler only counts the signal and writes a byte to a pipe; ``wait`` wakes on that
pipe, and ``then`` runs in a thread of its own, where taking locks is safe.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
from collections.abc import Callable
from types import FrameType, TracebackType
from typing import Any


class Interrupts:
    """Within ``with``: the signals given (default SIGINT) are counted in ``count``;
    ``wait(t)`` returns as soon as one came; ``then(signum)`` runs for each, in order,
    in a thread named ``topo-signals``."""

    def __init__(self, *signals: int, then: Callable[[int], None] | None = None) -> None:
        self.signals = signals or (signal.SIGINT,)
        self.count = 0
        self._then = then
        self._previous: dict[int, Any] = {}
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)
        self._worker: threading.Thread | None = None

    def start(self) -> Interrupts:
        """Hear the signals from now on (from the main thread)."""
        if self._then is not None:
            self._worker = threading.Thread(target=self._deliver, name="topo-signals", daemon=True)
            self._worker.start()
        for signum in self.signals:
            self._previous[signum] = signal.signal(signum, self._heard)
        return self

    def close(self) -> None:
        """Give the signals back to their previous handlers; the worker ends."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        os.close(self._w)  # the worker reads the end of the pipe and ends
        if self._worker is not None:
            self._worker.join(5)
        os.close(self._r)

    def __enter__(self) -> Interrupts:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _heard(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        with contextlib.suppress(BlockingIOError, OSError):
            os.write(self._w, bytes((signum,)))

    def wait(self, timeout: float) -> bool:
        """Whether a signal came, waiting up to ``timeout`` seconds for one (only without
        ``then``: its worker reads the pipe)."""
        if not self.count:
            select.select([self._r], [], [], timeout)
        return self.count > 0

    def _deliver(self) -> None:
        assert self._then is not None
        while True:
            try:
                got = os.read(self._r, 64)
            except OSError:
                return
            if not got:
                return
            for signum in got:
                self._then(signum)
