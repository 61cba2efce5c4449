"""Node kinds, declared once and read by every stage (see :mod:`topo.kinds.base`)."""

from topo.kinds.base import NodeKind, Options
from topo.kinds.catalog import (
    ENTRY_POINT_GROUP,
    UnknownKindError,
    all_kinds,
    client_for,
    get_kind,
    kind_names,
    option_owners,
    register_kind,
    unregister_kind,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "NodeKind",
    "Options",
    "UnknownKindError",
    "all_kinds",
    "client_for",
    "get_kind",
    "kind_names",
    "option_owners",
    "register_kind",
    "unregister_kind",
]
