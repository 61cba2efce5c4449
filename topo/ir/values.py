"""Argument values in the IR: immutable JSON-like trees that may hold node references.

A value is ``None | bool | int | float | str | tuple[Value, ...] | FrozenMap | Ref``.
Lists become tuples and mappings become :class:`FrozenMap`, so a compiled program
cannot be changed after the fact.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Union


@dataclass(frozen=True, slots=True)
class Ref:
    """A handle to another node, by node id; at run time it becomes a client object."""

    node: str


class FrozenMap(Mapping[str, Any]):
    """An immutable, hashable, order-preserving mapping (picklable, unlike MappingProxyType)."""

    __slots__ = ("_data", "_hash")

    def __init__(self, items: Mapping[str, Any] | None = None) -> None:
        self._data: dict[str, Any] = dict(items or {})
        self._hash: int | None = None

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(tuple(self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMap):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenMap, (self._data,))


Value = Union[None, bool, int, float, str, tuple["Value", ...], FrozenMap, Ref]  # noqa: UP007


def freeze(value: Any) -> Value:
    """Turn a plain JSON-like tree (lists, dicts) into an immutable IR value."""
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, Mapping) and not isinstance(value, FrozenMap):
        return FrozenMap({str(k): freeze(v) for k, v in value.items()})
    return value  # type: ignore[no-any-return]


def thaw(value: Value) -> Any:
    """The inverse of :func:`freeze`: plain lists and dicts (refs are kept as :class:`Ref`)."""
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    if isinstance(value, FrozenMap):
        return {k: thaw(v) for k, v in value.items()}
    return value


def iter_refs(value: Value, path: str = "") -> Iterator[tuple[str, Ref]]:
    """Yield ``(argument path, ref)`` for every reference inside ``value``."""
    if isinstance(value, Ref):
        yield path, value
    elif isinstance(value, tuple):
        for i, v in enumerate(value):
            yield from iter_refs(v, f"{path}[{i}]")
    elif isinstance(value, FrozenMap):
        for k, v in value.items():
            yield from iter_refs(v, f"{path}.{k}" if path else k)


def to_json(value: Value) -> Any:
    """Encode a value for JSON. Refs become ``{"$ref": id}``; a user mapping whose keys
    start with ``$`` is wrapped as ``{"$map": {...}}`` so decoding stays unambiguous."""
    if isinstance(value, Ref):
        return {"$ref": value.node}
    if isinstance(value, tuple):
        return [to_json(v) for v in value]
    if isinstance(value, FrozenMap):
        encoded = {k: to_json(v) for k, v in value.items()}
        if any(k.startswith("$") for k in encoded):
            return {"$map": encoded}
        return encoded
    return value


def from_json(data: Any) -> Value:
    """Decode what :func:`to_json` produced."""
    if isinstance(data, list):
        return tuple(from_json(v) for v in data)
    if isinstance(data, dict):
        if len(data) == 1 and "$ref" in data:
            return Ref(str(data["$ref"]))
        if len(data) == 1 and "$map" in data:
            return FrozenMap({k: from_json(v) for k, v in data["$map"].items()})
        return FrozenMap({k: from_json(v) for k, v in data.items()})
    return data  # type: ignore[no-any-return]
