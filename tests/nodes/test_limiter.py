"""StepsLimiter compares like Acme's: the program stops once the count is *greater* than
``max_steps``, not when it reaches it."""

from __future__ import annotations

import threading
import time

from topo.nodes import Counter, StepsLimiter
from topo.runtime import ProgramContext, node_scope


def _limiter_stops(counts: int, max_steps: int) -> bool:
    program = ProgramContext.local(default_deadline=10)
    counter = Counter()
    counter.increment(actor_steps=counts)
    limiter = StepsLimiter(counter, max_steps=max_steps, poll_s=0.01)
    done = threading.Event()

    def run() -> None:
        with node_scope(program, None):
            limiter.run()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    stopped = program.stop_event.wait(0.5)
    if not stopped:
        program.address_book.request_stop("test over")
    assert done.wait(5)
    return stopped


def test_limit_reached_but_not_exceeded_keeps_running() -> None:
    assert not _limiter_stops(counts=100, max_steps=100)


def test_limit_exceeded_stops_the_program() -> None:
    assert _limiter_stops(counts=101, max_steps=100)
    assert _limiter_stops(counts=1, max_steps=0)


def test_progress_is_written_as_metrics_with_an_estimate() -> None:
    program = ProgramContext.local(default_deadline=10)
    counter = Counter()
    limiter = StepsLimiter(counter, max_steps=1000, poll_s=0.05)
    done = threading.Event()

    def run() -> None:
        with node_scope(program, None):
            limiter.run()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    for _ in range(8):  # 100 steps every 0.05 s: about 2000 a second
        counter.increment(actor_steps=100)
        time.sleep(0.05)
    rows = list(limiter._metrics.rows)  # outside a topo program the rows stay here
    program.address_book.request_stop("test over")
    assert done.wait(5)
    last = rows[-1]
    assert last["limit_key"] == "actor_steps" and last["limit"] == 1000
    assert 0 < last["actor_steps"] <= 1000
    assert last["eta_s"] is not None and 0 < last["eta_s"] < 5
    assert rows[0]["eta_s"] is None  # one poll gives no rate yet
