"""Calls that give way to the program's stop: a future that never completes is given up
within a poll of the stop, a completed one still returns, a bounded one times out."""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout

import pytest

from examples.agents.common import StopAware, Stopping, result_unless_stopped
from topo.nodes import Counter
from topo.runtime import DeadlineExceeded


def test_a_call_that_never_answers_is_given_up_at_the_stop() -> None:
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    started = time.monotonic()
    with pytest.raises(Stopping):
        result_unless_stopped(Future(), stop)
    assert 0.25 < time.monotonic() - started < 2.0


def test_an_answer_already_there_is_taken_even_when_stopping() -> None:
    stop = threading.Event()
    stop.set()
    future: Future[int] = Future()
    future.set_result(7)
    assert result_unless_stopped(future, stop) == 7


def test_a_timeout_still_bounds_the_wait() -> None:
    started = time.monotonic()
    with pytest.raises(FutureTimeout):
        result_unless_stopped(Future(), threading.Event(), timeout=0.3)
    assert time.monotonic() - started < 2.0


def test_a_call_past_its_deadline_fails_at_once_instead_of_waiting_for_the_stop() -> None:
    # A DeadlineExceeded is a TimeoutError, as the poll's own timeout is: it was taken
    # for one, and the caller spun until the program stopped.
    future: Future[int] = Future()
    future.set_exception(DeadlineExceeded("learner", "get_variables", 0.5))
    stop = threading.Event()
    threading.Timer(3.0, stop.set).start()
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded):
        result_unless_stopped(future, stop)
    assert time.monotonic() - started < 1.0
    stop.set()


def test_a_local_object_without_futures_is_called_directly() -> None:
    counter = Counter()
    aware = StopAware(counter, threading.Event())
    assert aware.increment(steps=2) == {"steps": 2}
