"""IR values: freeze, opaque values (import path or pickle), the JSON encoding of values."""

from __future__ import annotations

import json
import pickle
import threading
import typing
from typing import Any

import ir_nodes
import pytest
from hypothesis import given, settings
from strategies import opaques, plain_values

from topo.ir import FrozenMap, Opaque, Ref, freeze, thaw
from topo.ir.printer import format_value
from topo.ir.values import from_json, import_path_of, to_json


def nested_function() -> Any:
    def inner(x: Any) -> Any:
        return x

    return inner


@settings(max_examples=300, deadline=None)
@given(value=plain_values)
def test_value_json_round_trip(value: Any) -> None:
    frozen = freeze(value)
    encoded = json.loads(json.dumps(to_json(frozen)))
    decoded = from_json(encoded)
    assert decoded == frozen
    assert hash(decoded) == hash(frozen)
    assert type(decoded) is type(frozen)
    assert freeze(frozen) == frozen  # idempotent


@settings(max_examples=200, deadline=None)
@given(value=opaques)
def test_opaque_json_and_pickle_round_trip(value: Opaque) -> None:
    decoded = from_json(json.loads(json.dumps(to_json(value))))
    assert isinstance(decoded, Opaque)
    assert (decoded, decoded.description) == (value, value.description)
    assert pickle.loads(pickle.dumps(value)) == value


@pytest.mark.parametrize(
    ("obj", "path"),
    [
        (ir_nodes.triple, "ir_nodes:triple"),
        (ir_nodes.EnvSpec, "ir_nodes:EnvSpec"),
        (ir_nodes.Applier.apply, "ir_nodes:Applier.apply"),
        (len, "builtins:len"),
        (typing, "typing:"),
    ],
)
def test_importable_objects_travel_by_name(obj: Any, path: str) -> None:
    assert import_path_of(obj) == path
    opaque = Opaque.of(obj)
    assert opaque.import_path == path and opaque.pickled is None
    assert opaque.load() is obj


@pytest.mark.parametrize(
    "obj",
    [
        lambda x: x,
        nested_function(),
        ir_nodes.EnvSpec("Pong", 3),  # an instance: no __qualname__
        ir_nodes.Applier(bytes, bytes, ir_nodes.EnvSpec("x", 1)).apply,  # a bound method
        b"bytes",
    ],
)
def test_other_objects_are_pickled(obj: Any) -> None:
    assert import_path_of(obj) is None
    opaque = Opaque.of(obj)
    assert opaque.pickled and opaque.import_path is None
    loaded = opaque.load()
    if callable(obj):
        assert loaded(b"ab") == obj(b"ab")
    else:
        assert loaded == obj


def test_main_module_objects_are_pickled_not_imported() -> None:
    def f() -> int:
        return 7

    f.__module__, f.__qualname__ = "__main__", "f"
    assert import_path_of(f) is None


def test_a_name_that_imports_to_another_object_is_not_an_import_path() -> None:
    def triple(x: int) -> int:
        return x

    triple.__module__, triple.__qualname__ = "ir_nodes", "triple"  # lies about where it lives
    assert import_path_of(triple) is None
    assert Opaque.of(triple).load()(5) == 5


def test_descriptions() -> None:
    assert Opaque.of(ir_nodes.triple).description == "<function triple from ir_nodes>"
    assert Opaque.of(ir_nodes.EnvSpec).description == "<class EnvSpec from ir_nodes>"
    assert Opaque.of(lambda: 0).description.startswith("<pickled lambda, ")
    big = Opaque.of(ir_nodes.EnvSpec("x" * 5000, 1)).description
    assert big.startswith("<pickled EnvSpec, ") and big.endswith(" KiB>")
    assert format_value(freeze({"f": ir_nodes.triple})) == "{f: <function triple from ir_nodes>}"


def test_freeze_turns_objects_into_opaque_values_and_keeps_plain_ones() -> None:
    frozen = freeze({"a": [1, "x", None, Ref("n")], "f": ir_nodes.triple, "s": {1, 2}})
    assert isinstance(frozen, FrozenMap)
    assert frozen["a"] == (1, "x", None, Ref("n"))
    assert isinstance(frozen["f"], Opaque) and isinstance(frozen["s"], Opaque)
    assert thaw(frozen)["f"] is frozen["f"]  # thaw keeps opaque values (resolve loads them)


def test_an_unpicklable_object_is_a_clear_type_error() -> None:
    with pytest.raises(TypeError, match=r"cannot put <unlocked _thread\.lock"):
        freeze({"lock": threading.Lock()})


def test_equality_ignores_the_description_and_needs_one_payload() -> None:
    assert Opaque("a", pickled=b"x") == Opaque("b", pickled=b"x")
    assert Opaque("a", pickled=b"x") != Opaque("a", pickled=b"y")
    assert Opaque("a", import_path="m:f") != Opaque("a", pickled=b"m:f")
    with pytest.raises(ValueError):
        Opaque("neither")
    with pytest.raises(ValueError):
        Opaque("both", import_path="m:f", pickled=b"")


def test_an_unfrozen_object_in_a_value_says_to_freeze_it() -> None:
    with pytest.raises(TypeError, match=r"not an IR value: pass node arguments through"):
        to_json(FrozenMap({"f": ir_nodes.triple}))
