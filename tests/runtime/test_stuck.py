"""A node whose handler threads are all stuck: flagged with the stuck methods and their
stacks, calls answered with ``NodeBusy`` before their deadline, and a close that does
not wait for them (real sockets, in this process)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from topo.runtime import Handle, ProgramContext, serve_node
from topo.runtime.errors import NodeBusy
from topo.testing import wait_until

THREADS = 8


class Stuck:
    """``hold`` blocks until the gate opens (at most a minute)."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.holding = 0
        self._lock = threading.Lock()

    def hold(self) -> bool:
        with self._lock:
            self.holding += 1
        return self.gate.wait(60)

    def ping(self, x: int) -> int:
        return x


@pytest.fixture
def program() -> ProgramContext:
    return ProgramContext.local()


@pytest.mark.slow
def test_a_node_with_every_handler_stuck_is_flagged_and_refuses_in_time(
    program: ProgramContext,
) -> None:
    obj = Stuck()
    told: list[dict[str, Any] | None] = []
    server = serve_node(
        obj, "stuck/0", program=program, threads=THREADS, on_busy=told.append, busy_after_s=1.0
    )
    try:
        h = Handle("stuck/0", 60.0, program=program)
        assert h.ping(1) == 1
        held = [h.futures.hold() for _ in range(THREADS)]
        wait_until(lambda: obj.holding == THREADS, 10)
        # A new call fails with the clear error before its deadline, not after it.
        start = time.monotonic()
        with pytest.raises(NodeBusy) as info:
            h.with_timeout(2.0).ping(2)
        assert time.monotonic() - start < 2.0
        assert "stuck/0.ping()" in str(info.value) and "hold ×8" in str(info.value)
        # The pool is flagged, with the stuck methods and their stacks.
        wait_until(lambda: told and told[-1] is not None, 5)
        report = told[-1]
        assert report is not None and server.busy is report
        assert report["methods"] == ["hold"] * THREADS
        assert report["stacks"].count("handler thread in hold for") == THREADS
        assert "self.gate.wait(60)" in report["stacks"]
        assert "stuck/0 answers no calls" in report["message"]
        # A call that waits is served once a thread is free; the flag is cleared.
        late = h.futures.ping(3)
        time.sleep(0.5)  # no event: a call held in a saturated server stays unanswered
        assert not late.done()
        obj.gate.set()
        assert late.result(timeout=10) == 3
        assert all(f.result(timeout=10) is True for f in held)
        wait_until(lambda: told[-1] is None, 5)
        assert server.busy is None
        assert h.ping(4) == 4
    finally:
        obj.gate.set()
        server.close()


def test_close_does_not_wait_for_stuck_handlers(program: ProgramContext) -> None:
    obj = Stuck()
    server = serve_node(obj, "stuck/1", program=program, threads=THREADS, busy_after_s=0.5)
    try:
        h = Handle("stuck/1", 60.0, program=program)
        [h.futures.hold() for _ in range(THREADS)]
        wait_until(lambda: obj.holding == THREADS and server.busy is not None, 10)
        start = time.monotonic()
        server.close(timeout=5.0)
        assert time.monotonic() - start < 1.0
    finally:
        obj.gate.set()


def test_a_busy_moment_is_not_flagged(program: ProgramContext) -> None:
    """Every thread busy for less than busy_after_s: calls queue and are served, no flag."""
    obj = Stuck()
    told: list[dict[str, Any] | None] = []
    server = serve_node(
        obj, "stuck/2", program=program, threads=2, on_busy=told.append, busy_after_s=3.0
    )
    try:
        h = Handle("stuck/2", 30.0, program=program)
        held = [h.futures.hold() for _ in range(2)]
        wait_until(lambda: obj.holding == 2, 10)
        queued = [h.futures.ping(i) for i in range(50)]
        time.sleep(1.0)  # a busy moment, shorter than busy_after_s
        obj.gate.set()
        assert [f.result(timeout=10) for f in queued] == list(range(50))
        assert all(f.result(timeout=10) for f in held)
        time.sleep(0.3)  # a watcher tick after the moment: still no flag
        assert told == [] and server.busy is None
    finally:
        obj.gate.set()
        server.close()
