"""Whole-group handles that follow their group while the program changes (``topo apply``).

A node's argument ``"@actor"`` becomes a :class:`GroupView`: a list of the members'
clients, in order. When the launcher changes the program's groups it announces a new
*membership generation* on the registry's channel; each process then asks the registry
for the members of the groups its nodes hold -- with the right to call each, which the
registry gives only for the groups the asking executable's nodes were wired to -- and
every view takes its new items at once (one slice assignment: a reader sees the old
list or the new one, never half of each). A member present before and after keeps its
client (and its connections).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Member:
    """One member of a group as the registry gives it: its node id, the token to call it,
    its kind (what client a reference to it becomes) and the deadline of calls to it."""

    node: str
    token: str
    kind: str
    call_timeout_s: float | None = None


# members -> their clients (the node's process builds them: it knows the node kinds)
Builder = Callable[[list[Member]], list[Any]]


class GroupView(list):  # type: ignore[type-arg]
    """The clients of a group's members, kept current while the program runs. It is a
    plain ``list`` for its reader (iterate, index, ``len``, ``random.choice``); a copy
    (``list(view)``) is a snapshot that no longer follows."""

    def __init__(self, group: str, items: Iterable[Any], build: Builder) -> None:
        super().__init__(items)
        self.group = group
        self._build = build
        self._lock = threading.Lock()

    def update(self, members: list[Member]) -> None:
        """Take ``members`` as the group's members (clients of members kept are reused)."""
        with self._lock:
            have = {_node_of(c): c for c in self}
            new = [m for m in members if m.node not in have]
            built = dict(zip([m.node for m in new], self._build(new), strict=True))
            self[:] = [have.get(m.node) or built[m.node] for m in members]

    def __reduce__(self) -> tuple[Any, ...]:  # pickles as the plain list it reads as
        return (list, (list(self),))

    def __repr__(self) -> str:
        return f"GroupView({self.group!r}, {list.__repr__(self)})"


def _node_of(client: Any) -> str:
    """The node id a member's client calls. Read without ``getattr``'s fallbacks: a
    reverb client forwards unknown attributes to the server it would connect to."""
    try:
        return str(object.__getattribute__(client, "_node_id"))
    except AttributeError:
        return str(object.__getattribute__(client, "node_id"))


class Views:
    """The group views of one process (one program member): updated together when the
    membership generation changes. Views are held weakly: a node that dropped its view
    is not kept alive by it."""

    def __init__(self) -> None:
        # id -> view, held weakly (a list is not hashable: no WeakSet)
        self._views: weakref.WeakValueDictionary[int, GroupView] = weakref.WeakValueDictionary()
        self._held: set[str] = set()  # every group a view was made of (a node's own copy
        # of the list drops the view, but the launcher still waits for this process)
        self._lock = threading.Lock()
        self.generation = 0  # the membership generation the views were last updated to

    def add(self, view: GroupView) -> None:
        """Keep ``view`` current from now on."""
        with self._lock:
            self._views[id(view)] = view
            self._held.add(view.group)

    def groups(self) -> set[str]:
        """The groups this process's nodes hold whole (a view was made of each)."""
        with self._lock:
            return set(self._held)

    def update(self, generation: int, groups: dict[str, list[Member]]) -> None:
        """Give each view the members ``groups`` has for it (views of other groups stay)."""
        with self._lock:
            views = list(self._views.values())
            self.generation = max(self.generation, generation)
        for view in views:
            members = groups.get(view.group)
            if members is not None:
                view.update(members)


def members_from_wire(answer: Any) -> tuple[int, dict[str, list[Member]]]:
    """The registry's ``members`` answer -- ``(generation, {group: [[node, token, kind,
    timeout], ...]})`` -- as :class:`Member` values."""
    generation, groups = answer
    return int(generation), {
        str(g): [
            Member(str(n), str(t), str(k), None if s is None else float(s)) for n, t, k, s in ms
        ]
        for g, ms in dict(groups).items()
    }
