"""Lifecycle API: stop, wait_for_stop, stop_event, current_node, colocated threads."""

from __future__ import annotations

import threading

import pytest
from rt_support import Spawn, assert_gone

from topo.runtime import (
    Handle,
    NodeInfo,
    ProgramContext,
    RegistryServer,
    batched,
    connect_program,
    current_node,
    new_program_id,
    new_secret,
    run_node,
    stop,
    stop_event,
    wait_for_stop,
)


def test_stop_from_a_node_thread_stops_only_this_program(
    program: ProgramContext, spawn: Spawn, registry: RegistryServer
) -> None:
    other = RegistryServer(new_program_id(), new_secret(), default_deadline=30.0)
    other_program = connect_program(other.info)
    try:
        runner = spawn("runner/0", cls="Runner")
        echo = spawn("echo/0")
        bystander = spawn("runner/0", cls="Runner", info=other.info)
        assert Handle("runner/0", program=program).ping() == "pong"
        assert Handle("runner/0", program=other_program).ping() == "pong"
        assert not program.stop_event.is_set()
        Handle("echo/0", program=program).stop_from_thread()
        assert program.stop_event.wait(30)
        assert registry.stop_reason() == ("stopped by test node", "echo/0")
        for proc in (runner, echo):
            assert proc.wait(30) == 0
            assert_gone(proc.pid)
        # The program started alongside is untouched (acme#222).
        assert bystander.poll() is None
        assert Handle("runner/0", program=other_program).ping() == "pong"
        other.request_stop("test over")
        assert bystander.wait(30) == 0
        assert_gone(bystander.pid)
    finally:
        other_program.address_book.close()
        other.close()


class _Colocated:
    def __init__(self, peer: str) -> None:
        self.peer = peer
        self.seen: list[NodeInfo] = []

    def run(self) -> None:
        self.seen.append(current_node())
        self.seen.append(Handle(self.peer).whoami())
        assert wait_for_stop(0.01) is False
        if current_node().replica == 0:
            self.ready.wait(30)
            stop("done")
        else:
            self.ready.set()
        stop_event().wait(30)

    def whoami(self) -> NodeInfo:
        return current_node()


def test_colocated_threads_each_see_their_node() -> None:
    program = ProgramContext.local(default_deadline=30)
    ready = threading.Event()
    nodes = [_Colocated("n/1"), _Colocated("n/0")]
    errors: list[BaseException] = []

    def main(i: int) -> None:
        nodes[i].ready = ready  # type: ignore[attr-defined]
        try:
            run_node(nodes[i], f"n/{i}", "n", i, program=program, threads=2)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=main, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
        assert not t.is_alive()
    assert not errors
    assert program.stop_event.is_set()
    assert program.address_book.stop_reason() == ("done", "n/0")
    for i, node in enumerate(nodes):
        assert (node.seen[0].id, node.seen[0].replica) == (f"n/{i}", i)
        assert node.seen[1].id == f"n/{1 - i}"


def test_current_node_outside_a_node_raises() -> None:
    result: list[BaseException] = []

    def probe() -> None:
        try:
            current_node()
        except RuntimeError as exc:
            result.append(exc)

    t = threading.Thread(target=probe)
    t.start()
    t.join()
    assert result and "outside a topo node" in str(result[0])
    with pytest.raises(ValueError):
        batched(batch_size=0)
