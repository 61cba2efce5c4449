"""A node's registration whose deadline passed is tried again (registering again is
harmless: the same endpoint), so a registry slow to answer 200 nodes starting at once on
a loaded machine fails none of them (a busy suite's 200-node Ray run lost a node so);
after REGISTER_TRIES, or once the program stops, the error is the node's. The calls are
the client's own method, given deadlines that pass."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from topo.runtime.errors import DeadlineExceeded
from topo.runtime.registry_client import REGISTER_TRIES, RegistryClient


def _client(fails: int) -> tuple[RegistryClient, list[tuple[Any, ...]]]:
    calls: list[tuple[Any, ...]] = []
    made = object.__new__(RegistryClient)
    made._stop = threading.Event()

    def call(method: str, *args: Any, timeout: float | None = None) -> None:
        calls.append((method, *args))
        if len(calls) <= fails:
            raise DeadlineExceeded("__registry__", method, 30.0)

    made._call = call  # type: ignore[method-assign]
    return made, calls


def test_a_registration_past_its_deadline_is_tried_again() -> None:
    client, calls = _client(fails=REGISTER_TRIES - 1)
    client.register("actor/7", "ipc://x", 1024)
    assert calls == [("register", "actor/7", "ipc://x", 1024)] * REGISTER_TRIES


def test_the_last_try_s_error_is_the_node_s_and_a_stopping_program_does_not_try_again() -> None:
    client, calls = _client(fails=REGISTER_TRIES)
    with pytest.raises(DeadlineExceeded):
        client.register("actor/7", "ipc://x")
    assert len(calls) == REGISTER_TRIES
    stopping, calls = _client(fails=1)
    stopping._stop.set()
    with pytest.raises(DeadlineExceeded):
        stopping.register("actor/7", "ipc://x")
    assert len(calls) == 1
