"""Argument values in the IR: immutable JSON-like trees that may hold node references.

A value is ``None | bool | int | float | str | tuple[Value, ...] | FrozenMap | Ref | Opaque``;
a reference to a whole group is a :class:`GroupRef`, a tuple of its members' refs that
knows its group (at run time a live list of handles: ``topo apply`` changes its members).
Lists become tuples and mappings become :class:`FrozenMap`, so a compiled program
cannot be changed after the fact. Any other Python object (a factory function, a
closure, an environment spec) becomes an :class:`Opaque` value: an import path when
the object can be imported back, otherwise its pickled bytes.
"""

from __future__ import annotations

import base64
import importlib
import sys
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Union


@dataclass(frozen=True, slots=True)
class Ref:
    """A handle to another node, by node id; at run time it becomes a client object."""

    node: str


class GroupRef(tuple[Ref, ...]):
    """``"@group"``: the refs of a group's nodes, in order, and the group's name. It is a
    tuple of :class:`Ref` wherever a value is read (iteration, indexing, edges), and keeps
    the group so that a running node's list of handles follows the group's membership."""

    group: str

    def __new__(cls, group: str, refs: tuple[Ref, ...] | list[Ref] = ()) -> GroupRef:
        obj = super().__new__(cls, refs)
        object.__setattr__(obj, "group", group)
        return obj

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("a GroupRef cannot be changed")

    def __eq__(self, other: object) -> bool:
        if isinstance(other, GroupRef) and other.group != self.group:
            return False
        return tuple.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(("topo.GroupRef", self.group, tuple(self)))

    def __reduce__(self) -> tuple[Any, ...]:
        return (GroupRef, (self.group, tuple(self)))

    def __repr__(self) -> str:
        return f"GroupRef({self.group!r}, {tuple(self)!r})"

    @property
    def nodes(self) -> tuple[str, ...]:
        """The member node ids, in order."""
        return tuple(ref.node for ref in self)


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


@dataclass(frozen=True, slots=True)
class Opaque:
    """A Python object carried by the IR as an import path (``module:qualname``) or as
    pickled bytes, with a readable description for printing. Exactly one of
    ``import_path`` and ``pickled`` is set; equality and hash ignore the description."""

    description: str = field(compare=False)
    import_path: str | None = None
    pickled: bytes | None = None

    def __post_init__(self) -> None:
        if (self.import_path is None) == (self.pickled is None):
            raise ValueError("an Opaque value needs exactly one of import_path and pickled")

    @classmethod
    def of(cls, obj: Any) -> Opaque:
        """Wrap ``obj``: by import path when it is reachable by import, else pickled
        with cloudpickle (TypeError when it cannot be pickled either)."""
        if isinstance(obj, Opaque):
            return obj
        path = import_path_of(obj)
        if path is not None:
            kind = "class" if isinstance(obj, type) else type(obj).__name__
            module, _, qualname = path.partition(":")
            return cls(f"<{kind} {qualname} from {module}>", import_path=path)
        import cloudpickle

        try:
            data = cloudpickle.dumps(obj, protocol=5)
        except Exception as exc:
            raise TypeError(
                f"cannot put {_short_repr(obj)} in a program: it cannot be imported by name "
                f"and cloudpickle failed ({type(exc).__name__}: {exc})"
            ) from exc
        return cls(f"<pickled {_what(obj)}, {_size(len(data))}>", pickled=data)

    def load(self) -> Any:
        """The object back: imported, or unpickled.

        Unpickling runs code: only call this on an Opaque that came from a program this
        process trusts (the launcher that compiled it), never on bytes from the network."""
        if self.import_path is not None:
            module, _, qualname = self.import_path.partition(":")
            obj: Any = importlib.import_module(module)
            for part in qualname.split(".") if qualname else ():
                obj = getattr(obj, part)
            return obj
        import cloudpickle

        assert self.pickled is not None
        return cloudpickle.loads(self.pickled)

    def to_json(self) -> dict[str, Any]:
        """``{"import": path}`` or ``{"pickle": base64}``, plus the description."""
        if self.import_path is not None:
            return {"import": self.import_path, "description": self.description}
        assert self.pickled is not None
        return {
            "pickle": base64.b64encode(self.pickled).decode("ascii"),
            "description": self.description,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Opaque:
        """The inverse of :meth:`to_json`."""
        description = str(data.get("description", ""))
        if "import" in data:
            return cls(description, import_path=str(data["import"]))
        return cls(description, pickled=base64.b64decode(data["pickle"], validate=True))


def import_path_of(obj: Any) -> str | None:
    """``module:qualname`` when importing that gives back ``obj`` itself, else None.

    Objects of ``__main__`` are never imported by name: a worker's ``__main__`` is not
    the launcher's script."""
    module = getattr(obj, "__module__", None)
    qualname = getattr(obj, "__qualname__", None)
    if isinstance(obj, types.ModuleType):
        module, qualname = obj.__name__, ""
    if not isinstance(module, str) or not isinstance(qualname, str) or module == "__main__":
        return None
    if "<" in qualname:  # <lambda>, <locals>
        return None
    loaded = sys.modules.get(module)
    if loaded is None:
        try:
            loaded = importlib.import_module(module)
        except Exception:
            return None
    found: Any = loaded
    for part in qualname.split(".") if qualname else ():
        found = getattr(found, part, None)
        if found is None:
            return None
    return f"{module}:{qualname}" if found is obj else None


def _what(obj: Any) -> str:
    if isinstance(obj, types.FunctionType | types.MethodType):
        name = obj.__qualname__
        return "lambda" if name.endswith("<lambda>") else f"function {name}"
    if isinstance(obj, type):
        return f"class {obj.__qualname__}"
    return type(obj).__qualname__


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    if n < 1024**2:
        return f"{n / 1024:.1f} KiB"
    return f"{n / 1024**2:.1f} MiB"


def _short_repr(obj: Any) -> str:
    text = repr(obj)
    return text if len(text) <= 60 else text[:57] + "..."


Value = Union[None, bool, int, float, str, tuple["Value", ...], FrozenMap, Ref, Opaque]  # noqa: UP007

_PLAIN = (type(None), bool, int, float, str, Ref, Opaque)


def freeze(value: Any) -> Value:
    """Turn a Python tree (lists, dicts, objects) into an immutable IR value: lists become
    tuples, mappings :class:`FrozenMap`, and any other object an :class:`Opaque`."""
    if isinstance(value, GroupRef):
        return value
    if isinstance(value, list | tuple):
        return tuple(freeze(v) for v in value)
    if isinstance(value, FrozenMap):
        return value
    if isinstance(value, Mapping):
        return FrozenMap({str(k): freeze(v) for k, v in value.items()})
    if isinstance(value, _PLAIN):
        return value
    return Opaque.of(value)


def thaw(value: Value) -> Any:
    """The inverse of :func:`freeze`: plain lists and dicts (refs and opaque values are kept)."""
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
    """Encode a value for JSON. Refs become ``{"$ref": id}``, group references
    ``{"$group": name, "nodes": [id, ...]}``; a user mapping whose keys
    start with ``$`` is wrapped as ``{"$map": {...}}`` so decoding stays unambiguous."""
    if isinstance(value, Ref):
        return {"$ref": value.node}
    if isinstance(value, GroupRef):
        return {"$group": value.group, "nodes": list(value.nodes)}
    if isinstance(value, Opaque):
        return {"$opaque": value.to_json()}
    if isinstance(value, tuple):
        return [to_json(v) for v in value]
    if isinstance(value, FrozenMap):
        encoded = {k: to_json(v) for k, v in value.items()}
        if any(k.startswith("$") for k in encoded):
            return {"$map": encoded}
        return encoded
    if value is None or isinstance(value, bool | int | float | str | list | dict):
        return value
    raise TypeError(
        f"{_short_repr(value)} is not an IR value: pass node arguments through "
        "topo.ir.freeze(), which turns Python objects into Opaque values"
    )


def from_json(data: Any) -> Value:
    """Decode what :func:`to_json` produced."""
    if isinstance(data, list):
        return tuple(from_json(v) for v in data)
    if isinstance(data, dict):
        if len(data) == 1 and "$ref" in data:
            return Ref(str(data["$ref"]))
        if set(data) == {"$group", "nodes"} and isinstance(data["nodes"], list):
            return GroupRef(str(data["$group"]), tuple(Ref(str(n)) for n in data["nodes"]))
        if len(data) == 1 and "$opaque" in data:
            return Opaque.from_json(data["$opaque"])
        if len(data) == 1 and "$map" in data:
            return FrozenMap({k: from_json(v) for k, v in data["$map"].items()})
        return FrozenMap({k: from_json(v) for k, v in data.items()})
    return data  # type: ignore[no-any-return]
