"""The node server's leader/followers pool under concurrency, on real sockets."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from topo.runtime import DeadlineExceeded, Handle, ProgramContext, serve_node
from topo.testing import wait_until


class _Mixed:
    """Fast and slow methods, counting how many handlers run at once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.gate = threading.Event()
        self.slow_done = 0

    def _enter(self) -> None:
        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)

    def _leave(self) -> None:
        with self.lock:
            self.now -= 1

    def fast(self, x: int) -> int:
        self._enter()
        self._leave()
        return x

    def slow(self, seconds: float) -> float:
        self._enter()
        time.sleep(seconds)
        self._leave()
        with self.lock:
            self.slow_done += 1
        return seconds

    def blocked(self) -> bool:
        """Returns once ``open_gate`` is called (or after 30 s)."""
        self._enter()
        opened = self.gate.wait(30)
        self._leave()
        return opened

    def open_gate(self) -> None:
        self.gate.set()


def test_many_threads_calling_one_node(program: ProgramContext) -> None:
    """32 threads, blocking calls and futures, fast and slow handlers mixed: every call
    gets its own answer, and never more than ``threads`` handlers run at once."""
    obj = _Mixed()
    server = serve_node(obj, "mixed/0", program=program, threads=4)
    try:
        h = Handle("mixed/0", program=program)

        def work(i: int) -> list[Any]:
            out: list[Any] = []
            for j in range(40):
                if j % 10 == 3:
                    out.append(h.slow(0.002 * (i % 5)))
                elif j % 2:
                    out.append(h.futures.fast(i * 1000 + j).result(timeout=30))
                else:
                    out.append(h.fast(i * 1000 + j))
            return out

        with ThreadPoolExecutor(32) as pool:
            results = list(pool.map(work, range(32)))
        for i, out in enumerate(results):
            assert out == [0.002 * (i % 5) if j % 10 == 3 else i * 1000 + j for j in range(40)]
        assert 1 < obj.most <= 4
        assert len(server._workers) <= 4
    finally:
        server.close()


def test_a_slow_handler_does_not_hold_up_fast_calls(program: ProgramContext) -> None:
    """While one call blocks in its handler, other calls are answered promptly."""
    obj = _Mixed()
    server = serve_node(obj, "mixed/0", program=program, threads=2)
    try:
        h = Handle("mixed/0", program=program)
        assert h.fast(1) == 1  # the only thread is now warm and leading
        stuck = h.futures.blocked()
        wait_until(lambda: obj.now == 1, 10, what="the blocked handler to run")
        assert not stuck.done()
        times = []
        for i in range(50):
            t0 = time.monotonic()
            assert h.fast(i) == i
            times.append(time.monotonic() - t0)
        times.sort()
        assert times[len(times) // 2] < 0.05, times  # served by the second thread
        # Both threads are taken now: a second blocked call waits for a free thread,
        # and is answered once the first one is released.
        h.open_gate()
        assert stuck.result(timeout=30) is True
        assert h.fast(7) == 7
    finally:
        server.close()


def test_threads_bound_concurrency_and_the_busy_pool_still_answers(
    program: ProgramContext,
) -> None:
    """With every thread stuck in a handler, a call waits; it is answered as soon as
    one handler ends (the thread that ends takes the socket over)."""
    obj = _Mixed()
    server = serve_node(obj, "mixed/0", program=program, threads=3)
    try:
        h = Handle("mixed/0", program=program)
        stuck = [h.futures.blocked() for _ in range(3)]
        wait_until(lambda: obj.now == 3, 10, what="three blocked handlers")
        late = h.futures.fast(5)
        time.sleep(0.3)  # no event to wait on: a call no thread is free for stays unanswered
        assert not late.done()  # all three threads are busy: nobody takes it
        assert obj.most == 3
        gate = threading.Thread(target=obj.open_gate)
        gate.start()
        assert late.result(timeout=30) == 5
        assert all(f.result(timeout=30) is True for f in stuck)
        assert obj.most == 3
        gate.join()
    finally:
        server.close()


@pytest.mark.slow
def test_stop_while_calls_are_in_flight(program: ProgramContext) -> None:
    """Closing a server with calls in its handlers and more queued: the handlers in
    hand finish and answer, the rest end with a deadline, and close returns."""
    obj = _Mixed()
    server = serve_node(obj, "mixed/0", program=program, threads=4)
    h = Handle("mixed/0", program=program).with_timeout(2.0)
    slow = [h.futures.slow(0.3) for _ in range(4)]
    queued = [h.futures.fast(i) for i in range(200)]
    wait_until(lambda: obj.now, 10, what="a slow handler to run", every=0.005)
    t0 = time.monotonic()
    server.close(timeout=10)
    assert time.monotonic() - t0 < 5
    assert not any(t.is_alive() for t in server._workers)
    for f in slow + queued:
        exc = f.exception(timeout=30)
        assert exc is None or isinstance(exc, DeadlineExceeded), exc
    # Every slow call that was in a handler when the server closed was answered.
    assert obj.slow_done >= 1
    assert sum(f.exception() is None for f in slow) == obj.slow_done


def test_pipelined_calls_are_coalesced_and_each_gets_its_answer(
    program: ProgramContext,
) -> None:
    """Many futures in flight go as batches; tiny calls, errors and large arrays mixed
    in still each get their own reply."""
    import numpy as np
    from rt_nodes import Echo

    server = serve_node(Echo(), "echo/0", program=program, threads=4)
    try:
        h = Handle("echo/0", program=program)
        h.echo(0)
        big = np.arange(100_000.0)
        futures = []
        for i in range(2000):
            if i % 97 == 5:
                futures.append(("boom", i, h.futures.boom(f"no {i}")))
            elif i % 101 == 7:
                futures.append(("big", i, h.futures.echo(big)))
            else:
                futures.append(("add", i, h.futures.add(i, b=1)))
        for kind, i, f in futures:
            if kind == "boom":
                exc = f.exception(timeout=30)
                assert isinstance(exc, ValueError) and f"no {i}" in str(exc)
            elif kind == "big":
                np.testing.assert_array_equal(f.result(timeout=30), big)
            else:
                assert f.result(timeout=30) == i + 1
        assert server._pool.batches > 0  # the calls did travel in batches
    finally:
        server.close()


def test_a_slow_call_in_a_batch_does_not_hold_up_the_rest(program: ProgramContext) -> None:
    """A batch frame sent by hand: its first call blocks, the calls after it in the
    same frame are answered by another thread meanwhile."""
    import zmq

    from topo.runtime import wire
    from topo.runtime.auth import secure_client, zmq_context

    obj = _Mixed()
    server = serve_node(obj, "mixed/0", program=program, threads=2)
    sock = zmq_context().socket(zmq.DEALER)
    try:
        secure_client(sock, program.mechanism, "test", str(program.mint("mixed/0")).encode())
        sock.connect(server.endpoint)
        calls = [
            wire.request_frames(1, "blocked", 30.0, (), {})[0],
            wire.request_frames(2, "fast", 30.0, (2,), {})[0],
            wire.request_frames(3, "fast", 30.0, (3,), {})[0],
        ]
        sock.send(wire.batch_frame(calls))
        got: dict[int, object] = {}
        t0 = time.monotonic()
        while len(got) < 2 and sock.poll(10_000):
            for msg in wire.parse_replies(sock.recv_multipart()):
                got[msg.call_id] = wire.loads(msg.payload, msg.buffers)
        assert got == {2: 2, 3: 3}
        assert time.monotonic() - t0 < 5
        obj.open_gate()
        assert sock.poll(10_000)
        (msg,) = wire.parse_replies(sock.recv_multipart())
        assert (msg.call_id, wire.loads(msg.payload, msg.buffers)) == (1, True)
    finally:
        sock.close(linger=0)
        server.close()


def test_a_call_held_back_for_coalescing_goes_out_without_waiting(
    program: ProgramContext,
) -> None:
    """A future sent while another call to the node is in flight is held back for
    coalescing; it still goes out (and completes) when its caller never waits on it."""
    from concurrent.futures import wait

    obj = _Mixed()
    server = serve_node(obj, "mixed/0", program=program, threads=2)
    try:
        h = Handle("mixed/0", program=program)
        assert h.fast(0) == 0
        slow = h.futures.slow(1.5)
        time.sleep(0.05)  # idle caller: the engine's I/O thread sleeps long
        t0 = time.monotonic()
        fast = h.futures.fast(5)
        done, _ = wait([fast], timeout=10)  # no result(): nobody drives the socket
        assert done == {fast} and fast.result() == 5
        assert time.monotonic() - t0 < 0.5
        assert not slow.done()
        assert slow.result(timeout=30) == 1.5
    finally:
        server.close()
