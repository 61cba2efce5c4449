"""The registry of node kinds: every kind declared in the entry-point group ``topo.kinds``
(each entry point loads to a NodeKind) -- topo's own built-in kinds as well as third-party
ones -- loaded once, lazily, plus kinds registered from code with :func:`register_kind`.

topo's own entry points come first, so the built-in kinds lead every list. An install
made before topo declared them (its metadata has none) still gets the built-in kinds,
with a warning to reinstall."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterable
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from topo.kinds.base import DEFAULT_LOOK, Look, NodeKind

ENTRY_POINT_GROUP = "topo.kinds"
DEFAULT_KIND = "courier"  # the kind of a YAML group that names none
REINSTALL = (
    "topo's built-in node kinds are missing from the installed package metadata (entry "
    "point group 'topo.kinds'; an install older than this version of topo); using them "
    "directly. Reinstall topo (pip install topo-launch, or ./dev setup in a checkout) to "
    "register them"
)

_kinds: dict[str, NodeKind] | None = None
_version = 0


class UnknownKindError(KeyError):
    """A kind name no registered kind has."""

    def __str__(self) -> str:
        return str(self.args[0])


def _is_topos(ep: EntryPoint) -> bool:
    return ep.module.split(".")[0] == "topo"


def _declared_first(ep: EntryPoint) -> tuple[int, int]:
    """topo's own entry points first, in the order their module defines the kinds (the
    metadata lists entry points sorted by name); the others after, as listed."""
    if not _is_topos(ep):
        return (1, 0)
    names = list(vars(sys.modules[ep.module])) if ep.module in sys.modules else []
    return (0, names.index(ep.attr) if ep.attr in names else len(names))


def _load(ep: EntryPoint) -> NodeKind | None:
    try:
        kind = ep.load()
    except Exception as exc:  # a broken plugin must not break topo
        warnings.warn(
            f"node kind entry point {ep.name!r} ({ep.value}) failed to load: "
            f"{type(exc).__name__}: {exc}",
            stacklevel=4,
        )
        return None
    if not isinstance(kind, NodeKind):
        warnings.warn(
            f"node kind entry point {ep.name!r} ({ep.value}) is a "
            f"{type(kind).__name__}, not a topo.kinds.NodeKind",
            stacklevel=4,
        )
        return None
    return kind


def load_entry_points(eps: Iterable[EntryPoint]) -> dict[str, NodeKind]:
    """The kinds the entry points ``eps`` declare, topo's own first (the first of a name
    wins); a broken entry point is skipped with a warning. Without any of topo's own (an
    old install) the kinds of :mod:`topo.kinds.builtin` come first, with a warning."""
    loaded = [(ep, _load(ep)) for ep in eps]
    kinds: dict[str, NodeKind] = {}
    if not any(_is_topos(ep) for ep, _ in loaded):
        from topo.kinds import builtin

        warnings.warn(REINSTALL, stacklevel=3)
        for value in vars(builtin).values():
            if isinstance(value, NodeKind):
                kinds.setdefault(value.name, value)
    for _, kind in sorted(loaded, key=lambda pair: _declared_first(pair[0])):
        if kind is not None:
            kinds.setdefault(kind.name, kind)
    return kinds


def _loaded() -> dict[str, NodeKind]:
    global _kinds
    if _kinds is None:
        _kinds = load_entry_points(entry_points(group=ENTRY_POINT_GROUP))
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


_looks: tuple[int, dict[str, Look]] | None = None


def look_of(role: str) -> Look:
    """How nodes of drawing role ``role`` are drawn: as the first kind declaring the role
    says, else a neutral look."""
    global _looks
    if _looks is None or _looks[0] != version():
        merged: dict[str, Look] = {}
        for kind in all_kinds():
            for name, look in kind.looks.items():
                merged.setdefault(name, look)
        _looks = (version(), merged)
    return _looks[1].get(role, DEFAULT_LOOK)


def role_of(kind_name: str, target: str, draw: str = "") -> str:
    """The drawing role of a node of kind ``kind_name`` built by ``target``, as its kind
    declares; for a kind not registered here, ``draw`` (the role the IR recorded)."""
    kind = _loaded().get(kind_name)
    if kind is None:
        return draw or kind_name
    return kind.role_for(target)


@cache
def _factory(path: str) -> Any:
    from topo.targets import load_target

    return load_target(path)


def client_for(kind_name: str, node_id: str, deadline_s: float | None) -> Any:
    """The live object a reference to ``node_id`` (of kind ``kind_name``) becomes."""
    return _factory(get_kind(kind_name).client)(node_id, deadline_s)
