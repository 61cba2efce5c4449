"""Least privilege: a member of a program reaches only the nodes it was given handles to.

Real registry, real servers and sockets, in this process: executables join as members
with their grants (as backends make them), over PLAIN/ipc and CURVE/tcp."""

from __future__ import annotations

import json
import pickle
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import topo
from topo.runtime import (
    Grant,
    Handle,
    NodeInfo,
    PermissionDenied,
    ProgramContext,
    RegistryServer,
    connect_program,
    new_program_id,
    new_secret,
    node_scope,
    serve_node,
)
from topo.runtime.auth import refused_count
from topo.runtime.rights import offering

# executable -> (the nodes it runs, the nodes they are wired to)
WIRING = {"exe-a": (("a",), ("b", "r")), "exe-b": (("b",), ()), "exe-r": (("r",), ())}


class _Trace:
    """Unpickling this creates a file: proof that bytes were unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


class Peer:
    """A node: echoes, keeps handles it is given, calls through them."""

    def __init__(self, peers: dict[str, Handle] | None = None) -> None:
        self.peers = peers or {}
        self.given: Handle | None = None

    def echo(self, x: Any) -> Any:
        return x

    def restore(self, *args: Any) -> str:
        return "restored"

    def introduce(self, to: str, about: str) -> bool:
        """Pass our handle to ``about`` in a call to ``to``."""
        return bool(self.peers[to].take(self.peers[about]))

    def take(self, handle: Handle) -> bool:
        self.given = handle
        return True

    def use_given(self) -> Any:
        assert self.given is not None
        return self.given.restore()


class Members:
    """A registry and one member context per executable (each serving its nodes)."""

    def __init__(self, mechanism: str) -> None:
        members = {exe: nodes for exe, (nodes, _) in WIRING.items()}
        self.registry = RegistryServer(
            new_program_id(),
            new_secret(),
            mechanism=mechanism,  # type: ignore[arg-type]
            default_deadline=30.0,
            members=members,
        )
        self.launcher = connect_program(self.registry.info)
        self.contexts: dict[str, ProgramContext] = {}
        self.objects: dict[str, Peer] = {}
        self.servers = []
        for exe, (nodes, calls) in WIRING.items():
            grant = self.registry.authority.grant(exe, nodes, calls)
            ctx = self.contexts[exe] = connect_program(self.registry.info.public(), grant)
            for node in nodes:
                with node_scope(ctx, NodeInfo(node, node)), offering(grant.calls):
                    obj = Peer({c: Handle(c) for c in calls})  # as a node's references
                self.objects[node] = obj
                self.servers.append(serve_node(obj, node, program=ctx))

    def scope(self, exe: str, node: str) -> Any:
        return node_scope(self.contexts[exe], NodeInfo(node, node))

    def close(self) -> None:
        for server in self.servers:
            server.close()
        for ctx in [*self.contexts.values(), self.launcher]:
            ctx.address_book.close()
        self.registry.close()


@pytest.fixture(params=["plain", "curve"])
def members(request: pytest.FixtureRequest) -> Iterator[Members]:
    m = Members(request.param)
    yield m
    m.close()


def test_a_node_reaches_its_references_and_nothing_else(members: Members) -> None:
    a = members.objects["a"]
    with members.scope("exe-a", "a"):
        assert a.peers["b"].echo(1) == 1
        assert a.peers["b"].futures.echo(2).result(30) == 2
        t0 = time.monotonic()
        with pytest.raises(PermissionDenied) as denied:
            Handle("b", 30.0).echo(3)  # made by hand: no right
        assert time.monotonic() - t0 < 5, "the refusal came only with the deadline"
    assert (denied.value.caller, denied.value.callee) == ("a", "b")
    assert "'b' refused a call from 'a'" in str(denied.value)
    assert isinstance(denied.value, topo.PermissionDenied)
    assert isinstance(denied.value, PermissionError)
    with members.scope("exe-r", "r"):
        t0 = time.monotonic()
        future = Handle("a", 30.0).futures.restore()
        with pytest.raises(PermissionDenied, match="'a' refused a call from 'r'"):
            future.result(30)
        assert time.monotonic() - t0 < 5
    # Outside a node the member (executable) is named.
    with pytest.raises(PermissionDenied, match="from 'exe-b'"):
        Handle("a", 30.0, program=members.contexts["exe-b"]).echo(1)


def test_the_launcher_reaches_every_node(members: Members) -> None:
    for node in ("a", "b", "r"):
        assert Handle(node, program=members.launcher).echo(node) == node
        assert Handle(node, program=members.launcher).futures.echo(node).result(30) == node


def test_a_forged_token_is_refused_before_unpickling(members: Members, tmp_path: Path) -> None:
    trace = tmp_path / "unpickled"
    before = refused_count()
    for cap in ("f" * 64, members.registry.authority.token("a"), new_secret()):
        with members.scope("exe-r", "r"), pytest.raises(PermissionDenied):
            Handle("b", 30.0, cap=cap).restore(_Trace(str(trace)))
    assert refused_count() >= before + 3
    assert not trace.exists(), "a refused caller's payload was unpickled"
    # Control: with b's token the same payload is unpickled.
    good = Handle("b", 30.0, cap=members.registry.authority.token("b"), program=members.launcher)
    good.restore(_Trace(str(trace)))
    assert trace.exists()


def test_a_handle_passed_in_a_call_carries_its_right(members: Members) -> None:
    r = members.objects["r"]
    with members.scope("exe-r", "r"), pytest.raises(PermissionDenied):
        Handle("b", 30.0).restore()
    with members.scope("exe-a", "a"):
        assert members.objects["a"].introduce("r", "b")
    assert r.given is not None and r.given.node_id == "b"
    with members.scope("exe-r", "r"):
        assert r.use_given() == "restored"
        assert r.given.futures.restore().result(30) == "restored"
    # It pickles with the right; a copy made from the id alone has none.
    again = pickle.loads(pickle.dumps(r.given))
    with members.scope("exe-r", "r"):
        assert again.restore() == "restored"
        with pytest.raises(PermissionDenied):
            Handle("b", 30.0).restore()


def test_the_registry_takes_a_member_only_for_its_own_nodes(members: Members) -> None:
    book = members.contexts["exe-r"].address_book
    assert book.lookup("b") is not None  # looking up is open to every member
    with pytest.raises(PermissionDenied, match="refused to register 'b'"):
        book.register("b", "ipc:///nowhere")  # taking over b's address
    with pytest.raises(PermissionDenied):
        book.unregister("b", str(book.lookup("b")))
    with pytest.raises(PermissionDenied):
        book.report("failed", "b", "exe-b", 0, 1, "forged")  # type: ignore[attr-defined]
    with pytest.raises(PermissionDenied):
        book.report("failed", "r", "exe-b", 0, 1, "forged")  # type: ignore[attr-defined]
    book.report("ready", "r", "exe-r", 0, 1, "")  # type: ignore[attr-defined]
    assert Handle("b", program=members.launcher).echo("still b") == "still b"
    # A note kept across restarts (a reverb node's doors) belongs to its node too.
    book.register("r@doors", '{"port": 1}')
    assert book.lookup("r@doors") == '{"port": 1}'
    with pytest.raises(PermissionDenied, match="refused to register 'b@doors'"):
        book.register("b@doors", '{"port": 2}')


def test_a_member_holds_no_secret_and_cannot_mint(members: Members) -> None:
    ctx = members.contexts["exe-r"]
    assert ctx.secret == "" and ctx.authority is None and ctx.mint("b") is None
    grant = ctx.grant
    assert grant is not None and set(grant.serve) == {"r"} and not grant.calls
    text = grant.to_json()
    assert members.registry.info.secret not in text
    assert Grant.from_json(text) == grant
    assert grant.key not in repr(grant) and grant.serve["r"][0] not in repr(grant)
    assert members.registry.info.public().secret == ""
    with pytest.raises(PermissionDenied, match="may not serve node 'b'"):
        serve_node(Peer(), "b", program=ctx)
    # Tokens are per node and per run.
    authority = members.registry.authority
    other = RegistryServer(new_program_id(), new_secret())
    try:
        assert authority.token("a") != authority.token("b")
        assert other.authority.token("a") != authority.token("a")
    finally:
        other.close()
    assert json.loads(text)["member"] == "exe-r"
