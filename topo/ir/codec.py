"""Lossless JSON encoding of the Program IR, versioned.

The encoder and decoder are derived from the dataclass fields and their type hints
(nested dataclasses, tuples, optionals, literals, :class:`FrozenMap` values), so a
field added to an IR dataclass is written and read with no change here. A field
missing from the JSON takes its default, which lets older files of the same
version be read after a field with a default was added.

Pickled payloads (closures, config objects: :class:`~topo.ir.values.Opaque` values) are
written once each, in the document's ``payloads`` table keyed by their SHA-256, and
referred to from where they occur: a factory shared by 256 actors travels once.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import types
import typing
from functools import cache
from typing import Any, Literal, Union, get_args, get_origin

from topo.ir import values
from topo.ir.program import IR_VERSION, READABLE_IR_VERSIONS, Edge, Program, SourcePos


class IRVersionError(ValueError):
    """The JSON was written by an incompatible version of the IR."""


class IRFormatError(ValueError):
    """The JSON does not have the shape of the IR (a field missing or of the wrong type)."""


# Dataclasses written compactly as a JSON list of their fields, in field order.
_AS_LIST: frozenset[type] = frozenset({SourcePos, Edge})


@cache
def _fields(cls: type) -> tuple[tuple[dataclasses.Field[Any], Any], ...]:
    """(field, resolved type) for every field of an IR dataclass."""
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls))


def _is_value(tp: Any) -> bool:
    """Whether ``tp`` is the argument value union ``topo.ir.values.Value``."""
    return get_origin(tp) in (Union, types.UnionType) and values.Ref in get_args(tp)


def _optional(tp: Any) -> Any | None:
    """``X`` for ``X | None`` (None for any other type); other unions are not IR types."""
    if get_origin(tp) not in (Union, types.UnionType):
        return None
    rest = [a for a in get_args(tp) if a is not type(None)]
    if len(rest) != 1:
        raise TypeError(f"the IR codec does not support the union type {tp}")
    return rest[0]


def encode(value: Any, tp: Any) -> Any:
    """``value`` (of IR type ``tp``) as JSON-ready data."""
    if value is None:
        return None
    if tp is values.Opaque or _is_value(tp):
        return values.to_json(value)
    inner = _optional(tp)
    if inner is not None:
        return encode(value, inner)
    if tp is values.FrozenMap:
        return values.to_json(value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        items = [(f.name, encode(getattr(value, f.name), t)) for f, t in _fields(tp)]
        return [v for _, v in items] if tp in _AS_LIST else dict(items)
    if get_origin(tp) is tuple:
        item = get_args(tp)[0]
        return [encode(v, item) for v in value]
    return value


def decode(data: Any, tp: Any, where: str = "") -> Any:
    """The inverse of :func:`encode`; :class:`IRFormatError` naming the path on bad data."""
    if _is_value(tp):
        return values.from_json(data)
    if tp is values.Opaque:
        if data is None or isinstance(data, values.Opaque):
            return data
        opaque = values.from_json(_expect(data, dict, where))
        if not isinstance(opaque, values.Opaque):
            raise IRFormatError(f"{where}: expected an opaque value, got {data!r:.60}")
        return opaque
    inner = _optional(tp)
    if inner is not None:
        return None if data is None else decode(data, inner, where)
    if tp is values.FrozenMap:
        decoded = values.from_json(_expect(data, dict, where))
        assert isinstance(decoded, values.FrozenMap)
        return decoded
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _decode_dataclass(data, tp, where)
    if get_origin(tp) is tuple:
        item = get_args(tp)[0]
        return tuple(
            decode(v, item, f"{where}[{i}]") for i, v in enumerate(_expect(data, list, where))
        )
    if get_origin(tp) is Literal:
        if data not in get_args(tp):
            allowed = ", ".join(repr(a) for a in get_args(tp))
            raise IRFormatError(f"{where}: {data!r} is not one of {allowed}")
        return data
    if tp is float:
        return _expect(data, (int, float), where)
    if tp in (int, str, bool):
        return _expect(data, tp, where)
    return data


def _decode_dataclass(data: Any, cls: type, where: str) -> Any:
    fields = _fields(cls)
    if cls in _AS_LIST:
        items = _expect(data, list, where)
        if len(items) != len(fields):
            raise IRFormatError(f"{where}: expected {len(fields)} items, got {len(items)}")
        return cls(
            *(
                decode(v, t, f"{where}[{i}]")
                for i, (v, (_, t)) in enumerate(zip(items, fields, strict=True))
            )
        )
    mapping = _expect(data, dict, where)
    kwargs: dict[str, Any] = {}
    for f, t in fields:
        path = f"{where}.{f.name}" if where else f.name
        if f.name in mapping:
            kwargs[f.name] = decode(mapping[f.name], t, path)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise IRFormatError(f"{path}: missing")
    return cls(**kwargs)


def _expect(data: Any, tp: type | tuple[type, ...], where: str) -> Any:
    ok = isinstance(data, tp) and not (isinstance(data, bool) and tp in (int, (int, float)))
    if not ok:
        name = tp.__name__ if isinstance(tp, type) else " or ".join(t.__name__ for t in tp)
        raise IRFormatError(f"{where or 'the document'}: expected {name}, got {data!r:.60}")
    return data


def _hoist(data: Any, table: dict[str, str]) -> Any:
    """``data`` with every pickled payload moved into ``table`` (digest -> base64)."""
    if isinstance(data, list):
        return [_hoist(v, table) for v in data]
    if not isinstance(data, dict):
        return data
    inner = data.get("$opaque") if len(data) == 1 else None
    if isinstance(inner, dict) and "pickle" in inner:
        b64 = inner["pickle"]
        digest = hashlib.sha256(b64.encode("ascii")).hexdigest()
        table.setdefault(digest, b64)
        return {"$opaque": {"payload": digest, "description": inner.get("description", "")}}
    return {k: _hoist(v, table) for k, v in data.items()}


def _restore(data: Any, table: dict[str, Any], cache: dict[str, bytes]) -> Any:
    """The inverse of :func:`_hoist`; each payload is decoded once and its bytes shared."""
    if isinstance(data, list):
        return [_restore(v, table, cache) for v in data]
    if not isinstance(data, dict):
        return data
    inner = data.get("$opaque") if len(data) == 1 else None
    if isinstance(inner, dict) and "payload" in inner:
        digest = inner["payload"]
        if digest not in table:
            raise IRFormatError(f"payload {digest!r:.20} is not in the payloads table")
        if digest not in cache:
            cache[digest] = base64.b64decode(table[digest], validate=True)
        description = str(inner.get("description", ""))
        # An Opaque inside JSON-shaped data: values.from_json passes it through as is.
        return values.Opaque(description, pickled=cache[digest])
    return {k: _restore(v, table, cache) for k, v in data.items()}


def program_to_dict(p: Program) -> dict[str, Any]:
    """The IR as plain JSON-ready data (``version`` first, ``payloads`` last)."""
    data = encode(p, Program)
    table: dict[str, str] = {}
    data = _hoist(data, table)
    out = {"version": data.pop("version"), **data}
    if table:
        out["payloads"] = table
    return out


def program_from_dict(d: dict[str, Any]) -> Program:
    """Rebuild a Program from :func:`program_to_dict` output."""
    version = d.get("version") if isinstance(d, dict) else None
    if version not in READABLE_IR_VERSIONS:
        raise IRVersionError(
            f"this IR was written as version {version!r}; this topo reads version {IR_VERSION} "
            "(compile the topology again, e.g. with `topo plan --json`)"
        )
    table = d.get("payloads", {})
    if not isinstance(table, dict):
        raise IRFormatError("payloads: expected dict")
    body = {k: v for k, v in d.items() if k != "payloads"}
    if table:
        body = _restore(body, table, {})
    program = decode(body, Program)
    assert isinstance(program, Program)
    return program


def dumps(p: Program, indent: int | None = 2) -> str:
    """The IR as a JSON string."""
    return json.dumps(program_to_dict(p), indent=indent)


def loads(text: str) -> Program:
    """A Program from a JSON string written by :func:`dumps`."""
    return program_from_dict(json.loads(text))
