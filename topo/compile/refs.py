"""References: ``"@group"``, ``"@group[i]"``, ``"@group?"`` resolved against the groups."""

from __future__ import annotations

import re
from dataclasses import dataclass

from topo.ir import Group, GroupRef, Ref

_REF = re.compile(r"^@(?P<group>[A-Za-z_][A-Za-z0-9_\-]*)(?:\[(?P<index>[^\]]*)\])?(?P<opt>\?)?$")


class RefError(ValueError):
    """A reference that does not resolve; the message is for users."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class GroupTable:
    """What references resolve against: groups (enabled or not) and their node ids."""

    groups: dict[str, Group]
    node_ids: dict[str, tuple[str, ...]]
    positions: dict[str, str]  # group -> "file:line:col" where it is declared, for messages
    # For checking the args of a disabled group: a reference to another disabled group is
    # fine there (both are usually switched by the same parameter) and resolves to nothing.
    lenient: bool = False

    def resolve(self, text: str) -> Ref | GroupRef | None:
        """A single Ref, a GroupRef (a whole multi-node group: a tuple of its Refs that
        knows its group) or None (optional, disabled)."""
        m = _REF.match(text)
        if m is None:
            raise RefError(
                f"'{text}' is not a valid reference",
                "write '@group', '@group[i]' (one replica) or '@group?' (null when the group is "
                "disabled); write '@@text' for a literal string starting with '@'",
            )
        name, index, optional = m["group"], m["index"], bool(m["opt"])
        group = self.groups.get(name)
        if group is None:
            from topo.loader.params import suggest

            hint = suggest(name, set(self.groups)) or f"groups: {', '.join(self.groups)}"
            raise RefError(f"'{text}' refers to group '{name}', which does not exist", hint)
        if not group.enabled:
            if optional or self.lenient:
                return None
            where = self.positions.get(name)
            raise RefError(
                f"'{text}' refers to group '{name}', which is disabled"
                + (f" (at {where})" if where else ""),
                f"write '@{name}?' to pass null when it is disabled",
            )
        ids = self.node_ids[name]
        if index is None:
            if group.singleton:
                return Ref(ids[0])
            return GroupRef(name, tuple(Ref(i) for i in ids))
        if index == "*":
            return GroupRef(name, tuple(Ref(i) for i in ids))
        if not index.strip().isdigit():
            raise RefError(f"'{text}': the replica index must be a number, got '{index}'")
        i = int(index)
        if i >= len(ids):
            span = f"replicas 0..{len(ids) - 1}" if ids else "no replicas"
            raise RefError(f"'{text}' is out of range: group '{name}' has {span}")
        return Ref(ids[i])

    def resolve_nodes(self, text: str) -> tuple[str, ...]:
        """The node ids a reference names (empty for a disabled optional group)."""
        resolved = self.resolve(text)
        if resolved is None:
            return ()
        if isinstance(resolved, Ref):
            return (resolved.node,)
        return tuple(r.node for r in resolved)


def is_reference(text: str) -> bool:
    """Whether a string is meant as a reference (starts with one '@')."""
    return text.startswith("@") and not text.startswith("@@")


def unescape(text: str) -> str:
    """``@@x`` -> ``@x``: the escape for literal strings that start with '@'."""
    return text[1:] if text.startswith("@@") else text
