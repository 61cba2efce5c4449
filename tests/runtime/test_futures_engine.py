"""The futures engine: callers receive their own replies; the I/O thread covers
futures nobody calls ``result()`` on (callbacks, ``wait``, ``as_completed``)."""

from __future__ import annotations

import os
import signal
import statistics
import threading
import time
from concurrent.futures import as_completed, wait
from typing import Any

import psutil
import pytest
from rt_support import Spawn

from topo.runtime import (
    DeadlineExceeded,
    Handle,
    PeerUnavailable,
    ProgramContext,
    RegistryServer,
    connect_program,
    new_program_id,
    new_secret,
)
from topo.runtime.futures import engine
from topo.testing import wait_until


def test_futures_complete_without_result_calls(program: ProgramContext, spawn: Spawn) -> None:
    spawn("echo/0")
    h = Handle("echo/0", program=program)
    assert h.echo(0) == 0
    seen: list[int] = []
    got = threading.Event()

    def on_done(f: object) -> None:
        seen.append(f.result())  # type: ignore[attr-defined]
        if len(seen) == 50:
            got.set()

    futures = [h.futures.echo(i) for i in range(50)]
    for f in futures:
        f.add_done_callback(on_done)
    assert got.wait(30), f"only {len(seen)} callbacks ran"
    assert sorted(seen) == list(range(50))
    done, not_done = wait([h.futures.echo(i) for i in range(20)], timeout=30)
    assert not not_done and sorted(f.result() for f in done) == list(range(20))
    assert sorted(
        f.result() for f in as_completed([h.futures.echo(i) for i in range(20)], timeout=30)
    ) == list(range(20))


def test_futures_from_many_threads_and_cancelled(program: ProgramContext, spawn: Spawn) -> None:
    spawn("echo/0")
    h = Handle("echo/0", program=program)
    errors: list[BaseException] = []

    def worker(k: int) -> None:
        try:
            window = [h.futures.echo((k, i)) for i in range(200)]
            window[0].cancel()  # may or may not win the race; must not break anything
            for i, f in enumerate(window[1:], 1):
                assert f.result(timeout=30) == (k, i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert h.futures.echo("after").exception(timeout=30) is None


def test_a_future_only_polled_with_done_completes_when_its_reply_comes(
    program: ProgramContext, spawn: Spawn
) -> None:
    """As Acme's variable client polls it: no ``result()``, no callback, just ``done()``
    between steps. The I/O thread, asleep with nothing in flight, must still see it."""
    spawn("echo/0")
    h = Handle("echo/0", program=program)
    assert h.echo(0) == 0
    waits = []
    for i in range(5):
        time.sleep(0.2)  # nothing in flight: the I/O thread goes to its long sleep
        f = h.futures.echo(i)
        start = time.monotonic()
        wait_until(f.done, 10, what="done() of the call", every=0.002)  # as Acme looks
        waits.append(time.monotonic() - start)
        assert f.result(timeout=0) == i
    # Before the fix each of these waited out the I/O thread's 1 s sleep.
    assert statistics.median(waits) < 0.5, waits


def test_deadlines_come_due_in_their_order_among_thousands_in_flight(
    program: ProgramContext, spawn: Spawn
) -> None:
    """A call with a short deadline made after hundreds with long ones fails at its own
    deadline while its peer answers nothing (stopped); the long ones are answered once
    it goes on; thousands of answered calls leave no bookkeeping behind."""
    proc = spawn("echo/0")
    slow = Handle("echo/0", timeout=120, program=program)
    assert slow.futures.echo(0).result(timeout=30) == 0  # connected before it stops
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED, 10)
        queued = [slow.futures.echo(i) for i in range(300)]  # sent: they fit the socket
        start = time.monotonic()
        late = Handle("echo/0", timeout=0.5, program=program).futures.echo("late")
        assert isinstance(late.exception(timeout=30), DeadlineExceeded)
        assert time.monotonic() - start < 5
        assert not any(f.done() for f in queued)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert [f.result(timeout=60) for f in queued] == list(range(300))
    more = [slow.futures.echo(i) for i in range(3000)]
    assert [f.result(timeout=60) for f in more] == list(range(3000))
    eng = engine()
    wait_until(  # a call at a time: the I/O thread runs its sweep meanwhile
        lambda: slow.echo(1) == 1 and len(eng._deadlines) <= 1024,
        10,
        what="the deadline sweep",
    )
    # (the engine is this process's: other tests' programs may have calls in flight)
    mine = [k for k, v in eng._inflight.items() if v[0].program_id == program.program_id]
    assert len(eng._deadlines) <= 1024 and not mine


@pytest.mark.slow
def test_a_registry_gone_holds_up_no_other_call(
    program: ProgramContext, spawn: Spawn, capfd: Any
) -> None:
    """A call to a peer of a program whose registry is gone cannot be resolved: it fails
    by its deadline, quietly, and its lookup holds up neither the I/O thread (which alone
    expires deadlines) nor the calls of another program (it waited 30 s for the registry,
    then raised in the I/O thread)."""
    spawn("echo/0")
    live = Handle("echo/0", program=program)
    assert live.echo(0) == 0
    registry = RegistryServer(new_program_id(), new_secret(), default_deadline=30.0)
    ended = connect_program(registry.info)
    registry.close()
    outcome: list[BaseException | None] = []
    try:
        ghost = Handle("ghost/0", timeout=3, program=ended)
        asking = threading.Thread(
            target=lambda: outcome.append(ghost.futures.echo(1).exception(timeout=60))
        )
        asking.start()
        time.sleep(0.5)  # the ghost's lookup is under way
        assert [live.futures.echo(i).result(timeout=15) for i in range(3)] == [0, 1, 2]
        asking.join(60)
        assert len(outcome) == 1 and isinstance(outcome[0], DeadlineExceeded | PeerUnavailable)
        assert live.futures.echo(3).result(timeout=15) == 3
    finally:
        ended.address_book.close()
    assert "futures engine" not in capfd.readouterr().err


@pytest.mark.slow
def test_the_io_thread_goes_on_after_a_fault(
    program: ProgramContext, spawn: Spawn, monkeypatch: pytest.MonkeyPatch, capfd: Any
) -> None:
    """A fault in a round of the I/O thread is printed once and the thread goes on: it alone
    expires deadlines, so had it ended, a call to a peer that answers nothing would wait
    for ever (and every later call of the process with it)."""
    proc = spawn("echo/0")
    slow = Handle("echo/0", timeout=120, program=program)
    assert slow.futures.echo(0).result(timeout=30) == 0
    eng = engine()
    real = eng._expire
    faults: list[float] = []

    def faulty(now: float) -> Any:
        if len(faults) < 2:  # the same fault twice, its message different each time
            faults.append(now)
            raise RuntimeError(f"a fault for the test, number {len(faults)}")
        return real(now)

    monkeypatch.setattr(eng, "_expire", faulty)
    wait_until(  # a call at a time: the I/O thread goes round meanwhile
        lambda: slow.echo(1) == 1 and len(faults) >= 2, 10, what="two faults"
    )
    assert len(faults) == 2
    os.kill(proc.pid, signal.SIGSTOP)
    try:
        wait_until(lambda: psutil.Process(proc.pid).status() == psutil.STATUS_STOPPED, 10)
        late = Handle("echo/0", timeout=0.5, program=program).futures.echo("late")
        assert isinstance(late.exception(timeout=30), DeadlineExceeded)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
    assert slow.futures.echo(2).result(timeout=30) == 2
    err = capfd.readouterr().err
    assert "a fault for the test, number 1" in err  # printed once, its kind not again
    assert err.count("hit a fault") == 1
