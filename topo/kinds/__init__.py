"""Node kinds, declared once and read by every stage (see :mod:`topo.kinds.base`)."""

from topo.kinds.base import DEFAULT_LOOK, Look, NodeKind, Options
from topo.kinds.catalog import (
    DEFAULT_KIND,
    ENTRY_POINT_GROUP,
    UnknownKindError,
    all_kinds,
    client_for,
    get_kind,
    kind_names,
    look_of,
    option_owners,
    register_kind,
    role_of,
    unregister_kind,
)

__all__ = [
    "DEFAULT_KIND",
    "DEFAULT_LOOK",
    "ENTRY_POINT_GROUP",
    "Look",
    "NodeKind",
    "Options",
    "UnknownKindError",
    "all_kinds",
    "client_for",
    "get_kind",
    "kind_names",
    "look_of",
    "option_owners",
    "register_kind",
    "role_of",
    "unregister_kind",
]
