"""An actor's first parameter fetch waits for its learner however long the learner takes
to get ready (its first JIT compile outlasted the call's deadline under load, and the DIAL
executors failed the run), and still gives way to the program's stop. A real topo node
serves the parameters over real sockets, with a short call deadline."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from examples.agents.common import Stopping, VariableClient
from topo.runtime import (
    Handle,
    ProgramContext,
    RegistryServer,
    connect_program,
    new_program_id,
    new_secret,
    serve_node,
)

DEADLINE_S = 0.5  # of each get_variables call


class SlowLearner:
    """Answers ``get_variables`` once ``ready`` is set (a learner still compiling); with
    ``ready_at`` calls, it is ready as that call comes (the ones before timed out)."""

    def __init__(self, ready_at: int | None = None) -> None:
        self.ready = threading.Event()
        self.calls = 0
        self.ready_at = ready_at

    def get_variables(self, names: list[str]) -> list[dict[str, int]]:
        self.calls += 1
        if self.ready_at is not None and self.calls >= self.ready_at:
            self.ready.set()
        self.ready.wait(30)
        return [{"w": 7} for _ in names]


@pytest.fixture
def program() -> Iterator[ProgramContext]:
    registry = RegistryServer(new_program_id(), new_secret(), default_deadline=30.0)
    prog = connect_program(registry.info)
    yield prog
    prog.address_book.close()
    registry.close()


@pytest.mark.slow
def test_the_first_fetch_outlasts_the_call_deadline_until_the_learner_answers(
    program: ProgramContext,
) -> None:
    # ready only as a third call comes: the first two outlast their deadline, whatever
    # the machine's load (a timer could fire before the first call timed out)
    learner = SlowLearner(ready_at=3)
    server = serve_node(learner, "learner", program=program, threads=4)
    try:
        client = VariableClient(Handle("learner", DEADLINE_S, program), stop=threading.Event())
        started = time.monotonic()
        client.update(wait=True)
        assert client.params == {"w": 7}
        assert time.monotonic() - started >= 2 * DEADLINE_S
        assert learner.calls >= 3  # each call that timed out went out again
    finally:
        learner.ready.set()
        server.close()


def test_the_first_fetch_gives_way_to_the_stop(program: ProgramContext) -> None:
    learner = SlowLearner()
    server = serve_node(learner, "learner", program=program, threads=4)
    try:
        stop = threading.Event()
        client = VariableClient(Handle("learner", DEADLINE_S, program), stop=stop)
        threading.Timer(3 * DEADLINE_S, stop.set).start()
        started = time.monotonic()
        with pytest.raises(Stopping):
            client.update(wait=True)
        assert time.monotonic() - started < 3 * DEADLINE_S + 1.0
        assert client.params is None
    finally:
        learner.ready.set()
        server.close()
