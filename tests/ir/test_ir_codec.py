"""The Program codec: lossless JSON round trip, versioning, errors, and a codec derived
from the dataclass fields (a new field needs no codec edit)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from strategies import programs

from topo.ir import (
    IR_VERSION,
    Executable,
    FrozenMap,
    Group,
    IRFormatError,
    IRVersionError,
    Node,
    Opaque,
    Program,
    SnapshotSettings,
    SourcePos,
    dumps,
    loads,
    program_from_dict,
    program_to_dict,
)
from topo.ir.codec import decode, encode

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "topologies").glob("*.yaml"))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs)
def test_random_programs_round_trip_through_json(program: Program) -> None:
    text = dumps(program)
    again = loads(text)
    assert again == program
    assert dumps(again) == text


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=programs)
def test_programs_pickle(program: Program) -> None:
    program.node_index  # noqa: B018  (a cached index must not break pickling)
    again = pickle.loads(pickle.dumps(program))
    assert again == program
    assert again.node_index == program.node_index


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_compiled_examples_round_trip(path: Path, compile_path: Any) -> None:
    program = compile_path(path)
    text = dumps(program)
    assert loads(text) == program
    assert dumps(loads(text)) == text
    assert pickle.loads(pickle.dumps(program)) == program


def test_json_keeps_the_v1_layout(compile_text: Any) -> None:
    """Same keys as before the codec was derived: dicts for groups, nodes and executables,
    lists for edges and source positions, ``version`` first."""
    program = compile_text("""
        name: layout
        nodes:
          a: {target: "m:A"}
          b: {target: "m:B", count: 2, args: {up: "@a"}}
    """)
    data = json.loads(dumps(program))
    assert next(iter(data)) == "version" and data["version"] == IR_VERSION
    assert set(data) == {
        "version",
        "name",
        "seed",
        "source",
        "params",
        "stop",
        "snapshots",
        "groups",
        "nodes",
        "edges",
        "executables",
    }
    group = data["groups"][1]
    assert set(group) >= {
        "name",
        "kind",
        "target",
        "count",
        "enabled",
        "singleton",
        "per_process",
        "restart",
        "resources",
        "rpc",
        "stops_program",
        "primary",
        "description",
        "origin",
    }
    assert set(group["resources"]) == {
        *("env", "workdir", "cpus", "gpus", "host_labels", "spread", "memory"),
        *("accelerators", "cpu_only"),
    }
    file, line, col = group["origin"]
    assert file.endswith("topology.yaml") and (line, col) > (0, 0)
    assert data["edges"][0] == ["b/0", "a", "up", "ref"]
    assert set(data["nodes"][0]) == {
        "id",
        "group",
        "replica",
        "seed",
        "executable",
        "args",
        "posargs",
        "kind",
        "target",
        "factory",
        "disable_run",
        "rpc",
    }
    assert set(data["executables"][0]) == {"id", "nodes", "mode", "placement"}


def test_an_older_ir_version_is_a_clear_error(compile_text: Any) -> None:
    data = program_to_dict(compile_text("{name: t, nodes: {a: {target: 'm:A'}}}"))
    data["version"] = 2
    with pytest.raises(IRVersionError, match=r"written as version 2; this topo reads version 4"):
        program_from_dict(data)
    with pytest.raises(IRVersionError, match="version None"):
        loads("[]")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d["groups"][0].pop("name"), r"groups\[0\]\.name: missing"),
        (lambda d: d["groups"][0].update(count="2"), r"groups\[0\]\.count: expected int"),
        (
            lambda d: d["groups"][0]["restart"].update(policy="often"),
            r"groups\[0\]\.restart\.policy: .often. is not one",
        ),
        (lambda d: d["groups"][0].update(origin=[1]), r"groups\[0\]\.origin: expected 3 items"),
        (lambda d: d["nodes"][0].update(args=[]), r"nodes\[0\]\.args: expected dict"),
        (lambda d: d["groups"][0]["rpc"].update(threads=True), r"rpc\.threads: expected int"),
    ],
)
def test_a_malformed_document_names_the_bad_field(
    compile_text: Any, change: Any, message: str
) -> None:
    data = program_to_dict(compile_text("{name: t, nodes: {a: {target: 'm:A'}}}"))
    change(data)
    with pytest.raises(IRFormatError, match=message):
        program_from_dict(data)


def test_a_missing_field_with_a_default_takes_it(compile_text: Any) -> None:
    data = program_to_dict(compile_text("{name: t, nodes: {a: {target: 'm:A', description: hi}}}"))
    del data["groups"][0]["description"], data["stop"]
    program = program_from_dict(data)
    assert program.groups[0].description == ""
    assert program.stop == type(program.stop)()


def test_snapshot_settings_round_trip_as_a_mapping(compile_text: Any) -> None:
    program = compile_text(
        "{name: t, nodes: {a: {target: 'm:A'}}, snapshots: {every_s: 600, keep: 2}}"
    )
    text = dumps(program)
    assert json.loads(text)["snapshots"] == {
        "every_s": 600.0,
        "keep": 2,
        "at_stop": True,
        "pause_timeout_s": 30.0,
    }
    again = loads(text)
    assert again.snapshots == SnapshotSettings(600.0, 2, True, 30.0) == program.snapshots
    assert dumps(again) == text


def test_a_program_json_from_before_snapshots_loads_without_them(compile_text: Any) -> None:
    """A program.json written before the field existed (same IR version) still loads."""
    program = compile_text("{name: t, nodes: {a: {target: 'm:A'}}, stop: {grace_s: 2}}")
    data = program_to_dict(program)
    del data["snapshots"]
    old = program_from_dict(json.loads(json.dumps(data)))
    assert old.snapshots == SnapshotSettings() and not old.snapshots.enabled
    assert old == program and old.stop.grace_s == 2.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"keep": "3"}, r"snapshots\.keep: expected int"),
        ({"keep": True}, r"snapshots\.keep: expected int"),
        ({"every_s": "600"}, r"snapshots\.every_s: expected int or float"),
        ({"at_stop": 1}, r"snapshots\.at_stop: expected bool"),
    ],
)
def test_malformed_snapshot_settings_name_the_field(
    compile_text: Any, change: dict[str, Any], message: str
) -> None:
    data = program_to_dict(compile_text("{name: t, nodes: {a: {target: 'm:A'}}, snapshots: {}}"))
    data["snapshots"].update(change)
    with pytest.raises(IRFormatError, match=message):
        program_from_dict(data)


def test_a_new_group_field_needs_no_codec_edit() -> None:
    """A dataclass like Group with one more field (say ``draw``) is encoded and decoded
    with the field, by the same generic functions."""
    Drawn = dataclasses.make_dataclass(
        "Drawn", [("draw", str, dataclasses.field(default="box"))], bases=(Group,), frozen=True
    )
    group = Drawn(
        name="g",
        kind="py",
        target="m:f",
        count=1,
        draw="ellipse",
        origin=SourcePos("t.yaml", 3, 4),
        resources=dataclasses.replace(
            Group("x", "py", "", 0).resources, env=FrozenMap({"A": "1"}), cpus=(0, 1)
        ),
    )
    data = json.loads(json.dumps(encode(group, Drawn)))
    assert data["draw"] == "ellipse" and data["origin"] == ["t.yaml", 3, 4]
    assert decode(data, Drawn) == group
    del data["draw"]
    assert decode(data, Drawn).draw == "box"


def test_a_pickled_payload_is_written_once_and_shared_when_read() -> None:
    """A closure given to many nodes travels once, in the payloads table."""
    scale = 3
    factory = Opaque.of(lambda x: x * scale)
    nodes = tuple(
        Node(
            f"a/{i}",
            "a",
            i,
            FrozenMap({"f": factory}),
            i,
            f"a/{i}",
            posargs=(factory, i),
            factory=factory,
        )
        for i in range(50)
    )
    program = Program(
        "p",
        0,
        FrozenMap(),
        (Group("a", "courier", "", 50, singleton=False),),
        nodes,
        (),
        tuple(Executable(n.id, (n.id,)) for n in nodes),
    )
    text = dumps(program)
    data = json.loads(text)
    assert list(data["payloads"]) == [hashlib.sha256(base64.b64encode(factory.pickled)).hexdigest()]
    assert text.count(base64.b64encode(factory.pickled).decode()) == 1
    back = loads(text)
    assert back == program
    first = back.nodes[0]
    assert first.factory is not None and first.factory.load()(2) == 6
    shared = {id(n.factory.pickled) for n in back.nodes if n.factory is not None}
    assert len(shared) == 1  # one bytes object for all 50 nodes, not 150 copies


def test_a_payload_missing_from_the_table_is_a_format_error() -> None:
    data = {
        "version": IR_VERSION,
        "name": "p",
        "seed": 0,
        "params": {"f": {"$opaque": {"payload": "ab" * 32, "description": "x"}}},
        "groups": [],
        "nodes": [],
        "edges": [],
        "executables": [],
        "payloads": {"cd" * 32: "AAAA"},
    }
    with pytest.raises(IRFormatError, match="not in the payloads table"):
        program_from_dict(data)
