"""RPC between real processes over real zmq sockets."""

from __future__ import annotations

import pickle
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from rt_support import Spawn, assert_gone

from topo.runtime import (
    Handle,
    PeerUnavailable,
    ProgramContext,
    RegistryServer,
    RemoteError,
    UnknownMethod,
    handles,
)
from topo.testing import wait_until


def test_sync_futures_and_arrays(program: ProgramContext, spawn: Spawn) -> None:
    spawn("echo/0", group="echo")
    h = Handle("echo/0", program=program)
    assert h.echo(1) == 1
    assert h.add(2, b=3) == 5
    assert h("x") == ("called", "x")
    tree = {"a": np.arange(12.0).reshape(3, 4), "b": [np.ones(5, np.int32), (np.zeros(2),)]}
    back = h.echo(tree)
    np.testing.assert_array_equal(back["a"], tree["a"])
    np.testing.assert_array_equal(back["b"][0], tree["b"][0])
    assert back["a"].flags.writeable
    big = np.random.default_rng(0).standard_normal(1 << 19)
    np.testing.assert_array_equal(h.echo(big), big)
    futures = [h.futures.add(i, b=1) for i in range(200)]
    assert [f.result(timeout=30) for f in futures] == [i + 1 for i in range(200)]
    assert h.futures("y").result(timeout=30) == ("called", "y")


def test_jax_arrays_travel_as_numpy(program: ProgramContext, spawn: Spawn) -> None:
    jnp = pytest.importorskip("jax.numpy")
    spawn("echo/0")
    out = Handle("echo/0", program=program).echo({"w": jnp.arange(6.0)})
    assert isinstance(out["w"], np.ndarray)
    np.testing.assert_array_equal(out["w"], np.arange(6.0))


def test_100_concurrent_callers(program: ProgramContext, spawn: Spawn) -> None:
    spawn("echo/0", threads=4)
    h = Handle("echo/0", program=program)

    def work(i: int) -> list[int]:
        return [h.add(i, b=j) for j in range(10)]

    with ThreadPoolExecutor(100) as pool:
        results = list(pool.map(work, range(100)))
    assert results == [[i + j for j in range(10)] for i in range(100)]


@pytest.mark.slow
def test_pool_grows_on_demand_up_to_its_size(program: ProgramContext, spawn: Spawn) -> None:
    spawn("echo/0", threads=3)
    h = Handle("echo/0", program=program)
    assert h.threads() <= 2  # one thread, plus a spare started while it answers
    calls = [h.futures.busy(1.0) for _ in range(8)]
    most = max(f.result(timeout=60) for f in calls)
    assert most == 3  # all three threads served at once, never a fourth
    assert h.threads() == 3


def test_thread_pool_size_is_honoured(program: ProgramContext, spawn: Spawn) -> None:
    spawn("echo/0", threads=3)
    h = Handle("echo/0", program=program)
    h.echo(0)
    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(h.whoami) for _ in range(3)]
        sleeps = [h.futures.sleep(0.5) for _ in range(3)]
        assert [f.result(timeout=30) for f in sleeps] == [0.5] * 3
        assert len({f.result()[3] for f in futures}) == 1


def test_list_handles_and_pickled_handles(program: ProgramContext, spawn: Spawn) -> None:
    for i in range(3):
        spawn(f"actor/{i}", group="actor", replica=i)
    spawn("hub/0", group="hub")
    group = handles([f"actor/{i}" for i in range(3)])
    hub = Handle("hub/0", program=program)
    # Handles pickle (node id only) and connect lazily inside another process.
    seen = hub.call_peers(pickle.loads(pickle.dumps(group)), "whoami")
    assert [(s[0], s[1], s[2]) for s in seen] == [(f"actor/{i}", "actor", i) for i in range(3)]
    assert len({s[3] for s in seen}) == 3
    assert [s[0] for s in hub.call_ids(["actor/2", "actor/0"])] == ["actor/2", "actor/0"]


def test_lazy_connect_to_late_peer(
    program: ProgramContext, spawn: Spawn, registry: RegistryServer
) -> None:
    h = Handle("late/0", timeout=60, program=program)
    fut = h.futures.echo("hello")
    result: list[object] = []
    t = threading.Thread(target=lambda: result.append(h.echo("sync")))
    t.start()
    # the calls looked the peer up and did not find it: they wait for it, not fail
    wait_until(lambda: "late/0" in registry.waited_for(60), 30, what="a lookup of late/0")
    assert not fut.done()
    spawn("late/0")
    assert fut.result(timeout=60) == "hello"
    t.join(60)
    assert result == ["sync"]


def test_deadline_raises_peer_unavailable(program: ProgramContext) -> None:
    h = Handle("ghost/0", program=program).with_timeout(0.3)
    with pytest.raises(PeerUnavailable) as info:
        h.echo(1)
    assert info.value.node_id == "ghost/0" and "ghost/0" in str(info.value)
    assert info.value.waited >= 0.3
    with pytest.raises(PeerUnavailable, match="ghost/0"):
        h.futures.echo(1).result(timeout=30)


def test_remote_exceptions(program: ProgramContext, spawn: Spawn) -> None:
    spawn("echo/0")
    h = Handle("echo/0", program=program)
    with pytest.raises(ValueError, match="bad input") as info:
        h.boom("bad input")
    err = info.value
    assert err.remote_node == "echo/0"  # type: ignore[attr-defined]
    assert "in boom" in err.remote_traceback  # type: ignore[attr-defined]
    assert any("echo/0" in note for note in err.__notes__)
    with pytest.raises(RemoteError) as info2:
        h.weird()
    assert "LocalOnly" in info2.value.type_name
    assert "not importable" in str(info2.value)
    with pytest.raises(ValueError):
        h.futures.boom("async").result(timeout=30)


def test_unknown_method(program: ProgramContext, spawn: Spawn) -> None:
    spawn("echo/0")
    with pytest.raises(AttributeError) as info:
        Handle("echo/0", program=program).no_such_method()
    assert isinstance(info.value, UnknownMethod)
    assert "no_such_method" in str(info.value) and "echo" in info.value.methods
    assert "run" not in info.value.methods


def test_peer_restarted_on_another_port_is_found(
    program: ProgramContext, spawn: Spawn, registry: RegistryServer
) -> None:
    first = spawn("echo/0")
    h = Handle("echo/0", program=program)
    pid1 = h.whoami()[3]
    old = registry.service.lookup("echo/0")
    first.terminate()
    first.wait(30)
    assert_gone(first.pid)
    fut = h.futures.whoami()
    spawn("echo/0")
    assert h.whoami()[3] != pid1
    assert fut.result(timeout=60)[3] != pid1
    assert registry.service.lookup("echo/0") not in (None, old)


def test_batched_handler_under_concurrency(program: ProgramContext, spawn: Spawn) -> None:
    spawn("policy/0", cls="Batched", threads=2)  # pool smaller than the batch
    h = Handle("policy/0", program=program)
    barrier = threading.Barrier(32)

    def act(i: int) -> dict[str, np.ndarray]:
        barrier.wait()
        return h.policy(np.array([float(i)]), scale=np.array([2.0]))

    with ThreadPoolExecutor(32) as pool:
        out = list(pool.map(act, range(32)))
    for i, r in enumerate(out):
        np.testing.assert_array_equal(r["y"], [2.0 * i])
    assert h.max_batch() > 1
    assert max(int(r["n"]) for r in out) <= 8


@pytest.mark.slow
def test_close_right_after_the_pool_grew(program: ProgramContext) -> None:
    """A handler thread started by the pool just before ``close`` has not bound its stop
    socket yet: ``close`` must still stop it, not fail with EAGAIN (seen under load)."""
    from rt_nodes import Echo

    from topo.runtime import serve_node

    for i in range(12):
        server = serve_node(Echo(), f"grow/{i}", program=program, threads=8)
        handle = Handle(f"grow/{i}", program=program).with_timeout(0.5)
        futures = [handle.futures.echo(n) for n in range(16)]  # the pool grows under them
        server.close(timeout=5)  # raised zmq.Again before
        assert not any(t.is_alive() for t in server._workers)
        for f in futures:
            f.exception(timeout=10)  # each call ends: answered, or past its 0.5 s deadline
