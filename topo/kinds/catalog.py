"""The registry of node kinds: the built-in ones, ones registered from code, and third-party
ones from the entry-point group ``topo.kinds`` (each entry point loads to a NodeKind),
loaded once, lazily."""

from __future__ import annotations

import warnings
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from topo.kinds.base import NodeKind
from topo.kinds.builtin import BUILTIN_KINDS

ENTRY_POINT_GROUP = "topo.kinds"

_kinds: dict[str, NodeKind] | None = None
_version = 0


class UnknownKindError(KeyError):
    """A kind name no registered kind has."""

    def __str__(self) -> str:
        return str(self.args[0])


def _loaded() -> dict[str, NodeKind]:
    global _kinds
    if _kinds is None:
        kinds = {k.name: k for k in BUILTIN_KINDS}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                kind = ep.load()
            except Exception as exc:  # a broken plugin must not break topo
                warnings.warn(
                    f"node kind entry point {ep.name!r} ({ep.value}) failed to load: "
                    f"{type(exc).__name__}: {exc}",
                    stacklevel=2,
                )
                continue
            if not isinstance(kind, NodeKind):
                warnings.warn(
                    f"node kind entry point {ep.name!r} ({ep.value}) is a "
                    f"{type(kind).__name__}, not a topo.kinds.NodeKind",
                    stacklevel=2,
                )
                continue
            kinds.setdefault(kind.name, kind)
        _kinds = kinds
    return _kinds


def register_kind(kind: NodeKind, *, replace: bool = False) -> NodeKind:
    """Add ``kind`` to the registry (ValueError if the name is taken, unless ``replace``)."""
    global _version
    kinds = _loaded()
    if kind.name in kinds and not replace and kinds[kind.name] is not kind:
        raise ValueError(f"a node kind named {kind.name!r} is already registered")
    kinds[kind.name] = kind
    _version += 1
    return kind


def unregister_kind(name: str) -> None:
    """Remove a registered kind (tests that register their own)."""
    global _version
    _loaded().pop(name, None)
    _version += 1


def get_kind(name: str) -> NodeKind:
    """The kind called ``name``; UnknownKindError naming the known kinds otherwise."""
    kind = _loaded().get(name)
    if kind is None:
        raise UnknownKindError(
            f"unknown node kind {name!r} (known kinds: {', '.join(kind_names())})"
        )
    return kind


def kind_names() -> list[str]:
    """The registered kind names, built-in ones first."""
    return list(_loaded())


def all_kinds() -> list[NodeKind]:
    """The registered kinds, built-in ones first."""
    return list(_loaded().values())


def version() -> int:
    """Bumped on every registration: models derived from the registry rebuild on change."""
    _loaded()
    return _version


def option_owners() -> dict[str, list[str]]:
    """Kind-specific YAML field -> the kinds that have it."""
    owners: dict[str, list[str]] = {}
    for kind in all_kinds():
        for name in kind.fields:
            owners.setdefault(name, []).append(kind.name)
    return owners


@cache
def _factory(path: str) -> Any:
    from topo.targets import load_target

    return load_target(path)


def client_for(kind_name: str, node_id: str, deadline_s: float | None) -> Any:
    """The live object a reference to ``node_id`` (of kind ``kind_name``) becomes."""
    return _factory(get_kind(kind_name).client)(node_id, deadline_s)
