"""Hypothesis strategies for IR values and whole Programs, derived from the type hints
the same way the codec is (a field added to an IR dataclass is generated too)."""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Literal, Union, get_args, get_origin

import ir_nodes
from hypothesis import strategies as st

from topo.ir import IR_VERSION, FrozenMap, Opaque, Program, Ref

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
)
keys = st.sampled_from(["$ref", "$map", "$opaque", "$x", "a", "ref", ""]) | st.text(max_size=5)

# Objects freeze() turns into Opaque values: importable ones, and ones it must pickle.
python_objects = (
    st.sampled_from([ir_nodes.triple, ir_nodes.EnvSpec, len, typing])
    | st.builds(ir_nodes.EnvSpec, st.text(max_size=5), st.integers(0, 10**6))
    | st.binary(max_size=20)
    | st.frozensets(st.integers(), max_size=3)
)
opaques = python_objects.map(Opaque.of) | st.builds(
    Opaque, st.text(max_size=20), pickled=st.binary(max_size=40)
)

plain_values = st.recursive(
    json_scalars | st.builds(Ref, st.text(min_size=1, max_size=6)) | python_objects,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)
"""Python trees before freeze(): lists, dicts, refs, scalars and arbitrary objects."""

frozen_maps = st.dictionaries(keys, plain_values, max_size=4).map(
    lambda d: FrozenMap({k: _freeze(v) for k, v in d.items()})
)


def _freeze(value: Any) -> Any:
    from topo.ir import freeze

    return freeze(value)


def strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    """Random values of an IR field type."""
    if get_origin(tp) in (Union, types.UnionType) and Ref in get_args(tp):
        return plain_values.map(_freeze)  # the argument value union (positional args)
    if tp is Opaque:
        return opaques
    if get_origin(tp) in (Union, types.UnionType):
        rest = [a for a in get_args(tp) if a is not type(None)]
        assert len(rest) == 1, tp
        return st.none() | strategy_for(rest[0])
    if tp is FrozenMap:
        return frozen_maps
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = typing.get_type_hints(tp)
        fields = {f.name: strategy_for(hints[f.name]) for f in dataclasses.fields(tp)}
        if tp is Program:
            fields["version"] = st.just(IR_VERSION)
        return st.builds(tp, **fields)
    if get_origin(tp) is tuple:
        return st.lists(strategy_for(get_args(tp)[0]), max_size=3).map(tuple)
    if get_origin(tp) is Literal:
        return st.sampled_from(get_args(tp))
    simple: dict[Any, st.SearchStrategy[Any]] = {
        str: st.text(max_size=8),
        int: st.integers(-(2**63), 2**63),
        float: st.floats(allow_nan=False),
        bool: st.booleans(),
    }
    return simple[tp]


programs = strategy_for(Program)
