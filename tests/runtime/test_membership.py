"""Whole-group handles that follow their group (``topo apply``): the registry gives each
member the current members of the groups it holds -- with the right to call them -- and
nothing else; views update in place and keep the clients of members that stay; an
executable can be asked to end its nodes without stopping the program.

Real registry, real servers over PLAIN/ipc and CURVE/tcp, in this process."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from topo.runtime import (
    Handle,
    NodeInfo,
    PermissionDenied,
    RegistryServer,
    connect_program,
    new_program_id,
    new_secret,
    node_scope,
    serve_node,
)
from topo.runtime.membership import GroupView, Member
from topo.runtime.rights import offering
from topo.testing import wait_until


class Worker:
    def __init__(self, name: str) -> None:
        self.name = name

    def who(self) -> str:
        return self.name


def _build(members: list[Member]) -> list[Any]:
    with offering({m.node: m.token for m in members}):
        return [Handle(m.node, 10.0) for m in members]


class Program:
    """A registry, workers w/0..w/3 each in an executable of its own, and a holder
    executable ``boss`` whose node holds the group ``w`` whole (and nothing else)."""

    def __init__(self, mechanism: str) -> None:
        members = {f"w/{i}": (f"w/{i}",) for i in range(4)} | {"boss": ("boss",), "x": ("x",)}
        self.registry = RegistryServer(
            new_program_id(),
            new_secret(),
            mechanism=mechanism,
            members=members,  # type: ignore[arg-type]
        )
        auth = self.registry.authority
        self.servers = []
        self.contexts = []
        for i in range(4):
            node = f"w/{i}"
            ctx = connect_program(self.registry.info.public(), auth.grant(node, [node], []))
            self.contexts.append(ctx)
            self.servers.append(serve_node(Worker(node), node, program=ctx))
        self.boss = connect_program(
            self.registry.info.public(), auth.grant("boss", ["boss"], ["w/0", "w/1"])
        )
        self.other = connect_program(self.registry.info.public(), auth.grant("x", ["x"], []))
        self.contexts += [self.boss, self.other]

    def publish(self, generation: int, nodes: list[str]) -> None:
        table = {"w": tuple((n, "courier", None) for n in nodes)}
        self.registry.set_members(generation, table, {"boss": frozenset({"w"})})

    def close(self) -> None:
        for server in self.servers:
            server.close()
        for ctx in self.contexts:
            ctx.address_book.close()
        self.registry.close()


@pytest.fixture(params=["plain", "curve"])
def program(request: pytest.FixtureRequest) -> Iterator[Program]:
    p = Program(request.param)
    yield p
    p.close()


def test_a_view_follows_its_group_and_its_holder_can_call_the_new_members(
    program: Program,
) -> None:
    program.publish(0, ["w/0", "w/1"])
    with node_scope(program.boss, NodeInfo("boss", "boss")):
        view = GroupView("w", [], _build)
        view.update(program_members(program.boss))
        first = view[0]
        program.boss.address_book.views.add(view)  # type: ignore[attr-defined]
        program.publish(1, ["w/0", "w/1", "w/2", "w/3"])
        wait_until(lambda: len(view) == 4, 10)
        assert [h.node_id for h in view] == ["w/0", "w/1", "w/2", "w/3"]
        assert view[0] is first  # a member that stays keeps its client
        assert [h.who() for h in view] == ["w/0", "w/1", "w/2", "w/3"]  # tokens came with them
        program.publish(2, ["w/3"])
        wait_until(lambda: [h.node_id for h in view] == ["w/3"], 10)
    assert program.registry.fetched("boss") == 2


def program_members(ctx: Any) -> list[Member]:
    from topo.runtime.membership import members_from_wire

    book = ctx.address_book
    _, groups = members_from_wire(book._call("members"))
    return groups.get("w", [])


def test_the_registry_gives_members_only_to_the_executables_that_hold_the_group(
    program: Program,
) -> None:
    program.publish(1, ["w/0", "w/1", "w/2"])
    assert [m.node for m in program_members(program.boss)] == ["w/0", "w/1", "w/2"]
    assert program_members(program.other) == []  # x holds no handle to w: no token for it
    with pytest.raises(PermissionDenied):  # and it cannot rewrite the groups over RPC
        program.other.address_book._call("set_members", 9, {}, {})
    with pytest.raises(PermissionDenied):
        program.other.address_book._call("forget", ["w/0"])
    assert program.registry.service.generation == 1


def test_an_executable_asked_to_end_stops_alone(program: Program) -> None:
    ending = program.contexts[2]  # w/2's process
    program.registry.end_members(["w/2"])
    wait_until(lambda: ending.stop_event.is_set(), 10)
    assert ending.address_book.stop_reason() == ("ended by topo apply", None)
    assert not program.boss.stop_event.is_set() and not program.registry.stop_event.is_set()
    program.registry.unend("w/2")
