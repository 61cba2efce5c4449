"""Signals heard by ``topo.cli.interrupts``: the handler takes no lock, so a signal that
comes while the main thread holds one cannot hang the command."""

from __future__ import annotations

import os
import signal
import threading
import time

from topo.cli.interrupts import Interrupts
from topo.testing import wait_until


def test_a_signal_while_the_main_thread_holds_the_lock_then_needs() -> None:
    """A handler that took this lock itself would wait for ever: the main thread, which
    runs it, holds it (as ``Event.wait`` holds its event's lock at moments)."""
    lock = threading.Lock()
    got: list[int] = []

    def then(signum: int) -> None:
        with lock:
            got.append(signum)

    with Interrupts(signal.SIGINT, signal.SIGTERM, then=then) as heard:
        with lock:
            os.kill(os.getpid(), signal.SIGTERM)  # handled here, on this thread
            os.kill(os.getpid(), signal.SIGINT)
            assert heard.count == 2
            time.sleep(0.2)  # no event: `then` waits for the lock in its own thread meanwhile
            assert got == []
        wait_until(lambda: len(got) >= 2, 30, what="then() of both signals")
    assert got == [signal.SIGTERM, signal.SIGINT]


def test_wait_returns_at_the_signal_and_the_previous_handler_comes_back() -> None:
    before = signal.getsignal(signal.SIGINT)
    with Interrupts() as ctrl_c:
        assert not ctrl_c.wait(0.05)
        threading.Timer(0.2, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.monotonic()
        assert ctrl_c.wait(60)
        assert time.monotonic() - start < 30  # woken by the signal, not the timeout
        assert ctrl_c.count == 1
    assert signal.getsignal(signal.SIGINT) is before
