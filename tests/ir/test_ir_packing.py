"""Packing nodes into executables (topo.ir.packing), the one implementation the YAML
compiler and the Launchpad translator share: ids, modes, order, placement, problems."""

from __future__ import annotations

import pytest

from topo.ir import Executable
from topo.ir.packing import Colocation, consecutive_replicas, pack, replicas_id, set_name


def ids(group: str, count: int) -> list[str]:
    return [f"{group}/{i}" for i in range(count)]


def test_names() -> None:
    assert replicas_id(["actor/2", "actor/3", "actor/4"]) == "actor/2-4"
    assert replicas_id(["actor/2"]) == "actor/2"
    assert replicas_id(["learner"]) == "learner"
    assert set_name(["learner", "replay/0", "replay/1", "learner"]) == "learner+replay"
    assert consecutive_replicas(["a/3", "a/4", "a/5"]) and consecutive_replicas(["a"])
    assert not consecutive_replicas(["a/3", "a/5"])
    assert not consecutive_replicas(["a/0", "b/1"])
    assert not consecutive_replicas(["a", "b"])


def test_every_node_alone_by_default() -> None:
    packing = pack({"a": ["a"], "b": ids("b", 2), "off": []}, [])
    assert packing.executables == [
        Executable("a", ("a",)),
        Executable("b/0", ("b/0",)),
        Executable("b/1", ("b/1",)),
    ]
    assert packing.node_exe == {"a": "a", "b/0": "b/0", "b/1": "b/1"}
    assert packing.problems == []


def test_per_process_chunks_and_thread_sets_where_their_first_member_stands() -> None:
    node_ids = {"actor": ids("actor", 5), "learner": ["learner"], "replay": ["replay"]}
    packing = pack(
        node_ids,
        [Colocation(("learner", "replay")), Colocation(("replay",), name="unused")],
        per_process={"actor": 2},
    )
    assert [(e.id, e.nodes, e.mode) for e in packing.executables] == [
        ("actor/0-1", ("actor/0", "actor/1"), "replicas"),
        ("actor/2-3", ("actor/2", "actor/3"), "replicas"),
        ("actor/4", ("actor/4",), "replicas"),
        ("learner+replay", ("learner", "replay"), "set"),
    ]
    [twice] = packing.problems
    assert twice.message == (
        "node 'replay' is in two threads colocation sets ('learner+replay' and 'unused')"
    )
    assert (twice.colocation, twice.setting, twice.node) == (1, ("nodes",), "replay")


def test_replicas_requests_are_named_as_per_process_chunks() -> None:
    """What the Launchpad translator asks for when a thread colocation holds alike replicas."""
    packing = pack(
        {"actor": ids("actor", 5)},
        [
            Colocation(("actor/0", "actor/1", "actor/2"), "replicas"),
            Colocation(("actor/4",), "replicas"),
        ],
    )
    assert [(e.id, e.mode) for e in packing.executables] == [
        ("actor/0-2", "replicas"),
        ("actor/3", "single"),
        ("actor/4", "replicas"),
    ]


def test_host_sets_place_every_executable_holding_their_nodes() -> None:
    packing = pack(
        {"a": ids("a", 2), "b": ["b"]},
        [Colocation(("a/0", "b")), Colocation(("b", "a/1"), "host", "rack")],
    )
    assert packing.executables == [
        Executable("a+b", ("a/0", "b"), "set", "rack"),
        Executable("a/1", ("a/1",), "single", "rack"),
    ]


@pytest.mark.parametrize(
    ("requests", "per_process", "spread", "message", "key"),
    [
        (
            [Colocation(("a/0", "b")), Colocation(("a/1", "b/1"), name="a+b")],
            {},
            (),
            "two thread colocation sets are named 'a+b'",
            {"colocation": 1},
        ),
        (
            [Colocation(("a/0", "b"))],
            {"a": 2},
            (),
            "group 'a' packs its replicas with colocate.per_process and also appears in "
            "colocation set 'a+b'",
            {"colocation": 0, "group": "a", "setting": ("nodes",)},
        ),
        (
            [
                Colocation(("a/0", "b")),
                Colocation(("a/0",), "host", "h1"),
                Colocation(("b",), "host", "h2"),
            ],
            {},
            (),
            "executable 'a+b' would have to run on two host sets ('h1' and 'h2')",
            {"executable": "a+b"},
        ),
        (
            [Colocation(("a/1", "b"), "host", "rack")],
            {},
            ("a",),
            "group 'a' sets resources.spread, so each of its processes picks its own host, but "
            "nodes of it are in host-colocation set 'rack'",
            {"group": "a", "setting": ("resources", "spread")},
        ),
        (
            [Colocation(("a/0", "a/1"), name="b")],
            {},
            (),
            "two executables would be named 'b'",
            {"executable": "b"},
        ),
    ],
)
def test_problems_are_keyed_by_what_they_are_about(
    requests: list[Colocation],
    per_process: dict[str, int],
    spread: tuple[str, ...],
    message: str,
    key: dict[str, object],
) -> None:
    packing = pack({"a": ids("a", 2), "b": ["b"]}, requests, per_process=per_process, spread=spread)
    [problem] = packing.problems
    assert problem.message == message
    assert {k: getattr(problem, k) for k in key} == key


def test_an_empty_request_is_skipped() -> None:
    """A YAML entry whose references all failed (reported already) asks for nothing."""
    packing = pack({"a": ["a"]}, [Colocation(())])
    assert packing.executables == [Executable("a", ("a",))] and packing.problems == []
