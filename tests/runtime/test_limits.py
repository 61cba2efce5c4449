"""A request larger than the node accepts fails at once with the size error, whatever its
size and however it is sent (a node's limit travels with its address)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from rt_support import Spawn

from topo.runtime import Handle, InProcessAddressBook, ProgramContext, client
from topo.runtime.errors import MessageTooLarge

LIMIT = 1 << 20
AT_ONCE_S = 3.0  # far below the calls' 30 s deadline


def _too_large(call: object, node: str, method: str = "echo") -> MessageTooLarge:
    start = time.monotonic()
    with pytest.raises(MessageTooLarge) as info:
        if callable(call):
            call()
    assert time.monotonic() - start < AT_ONCE_S
    err = info.value
    assert f"{node}.{method}()" in str(err) and err.node_id == node and err.method == method
    assert err.limit == LIMIT and err.size > LIMIT
    assert "max_message_mb" in str(err)
    return err


def test_oversized_requests_fail_at_once(program: ProgramContext, spawn: Spawn) -> None:
    spawn("echo/0", max_bytes=LIMIT)
    h = Handle("echo/0", 30.0, program=program)
    assert h.echo(1) == 1
    # Just under the limit (payload plus header) goes through, both ways of sending.
    under = b"x" * (LIMIT - 4096)
    assert h.echo(under) == under
    assert h.futures.echo(under).result(timeout=30) == under
    for size in (LIMIT + 1, LIMIT + 4096, 3 * LIMIT, 64 * LIMIT):
        _too_large(lambda s=size: h.echo(b"x" * s), "echo/0")  # in-band bytes
        _too_large(lambda s=size: h.echo(np.zeros(s, np.uint8)), "echo/0")  # out of band
        fut = h.futures.echo(b"x" * size)
        _too_large(lambda f=fut: f.result(timeout=30), "echo/0")
    # Several frames, each under the limit, together over it.
    _too_large(
        lambda: h.add(np.zeros(LIMIT // 2, np.uint8), np.zeros(LIMIT // 2, np.uint8)),
        "echo/0",
        "add",
    )
    assert h.echo("after") == "after"


def test_futures_to_a_peer_not_resolved_yet(program: ProgramContext, spawn: Spawn) -> None:
    """Calls submitted before the peer registered are checked once it has."""
    spawn("echo/1", max_bytes=LIMIT)
    h = Handle("echo/1", 30.0, program=program)
    big = h.futures.echo(b"x" * (2 * LIMIT))
    small = h.futures.echo("small")
    _too_large(lambda: big.result(timeout=30), "echo/1")  # (waits for the node to start)
    assert small.result(timeout=30) == "small"


def test_the_node_refuses_what_a_client_did_not_check(
    program: ProgramContext, spawn: Spawn
) -> None:
    """A client whose address book does not know the limit: the node itself answers with
    the size error (several frames); it is never left to the deadline."""
    spawn("echo/2", max_bytes=LIMIT)
    assert Handle("echo/2", 30.0, program=program).echo(1) == 1
    endpoint = program.address_book.lookup("echo/2")
    assert endpoint is not None
    book = InProcessAddressBook()
    book.register("echo/2", endpoint)  # no limit known
    blind = ProgramContext(
        program.program_id, program.secret, book, 30.0, program.mechanism, ipc_dir=program.ipc_dir
    )
    client.limits.pop((program.program_id, "echo/2"), None)
    h = Handle("echo/2", 30.0, program=blind)
    parts = tuple(np.zeros(LIMIT // 2, np.uint8) for _ in range(3))
    _too_large(lambda: h.echo(parts), "echo/2")
    assert h.echo("after") == "after"
