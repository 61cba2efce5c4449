"""A structural diff of two compiled programs: what changes, where, and what it does to a
running program (``topo diff``; ``topo apply`` turns it into actions).

:func:`diff_programs` compares two :class:`Program` values field by field -- never their
text -- and returns a :class:`ProgramDiff`: frozen, deterministic (ordered as the new
program lists groups and nodes, then what only the old one has), cheap enough for a
1,000-node program.

The plan's parts:

- ``program``: program-level changes (``name``, ``seed``, ``params.NAME``, ``stop.*``,
  ``snapshots.*``). A changed program seed changes every node's seed (and arguments
  derived from it, ``${seed.key}``): it is said once here, not per node.
- ``groups``: one :class:`GroupDiff` per group added (``+``), removed (``-``) or changed
  (``~``), with its count (old, new; 0 when absent), its setting changes (``kind``,
  ``restart.policy``, ``resources.env.NAME``, ``rpc.threads``, ...) and its nodes that
  start (``+``), stop (``-``) or change (``~``: arguments by path as ``config.lr`` or
  ``sources[1]``, positional arguments as ``posargs[0]``, the node's own ``target`` /
  ``kind`` / ``factory`` / ``disable_run`` / ``rpc.*``, its ``executable``, and its
  wiring: a handle whose target or ``via`` changed, with the edge's ``via``).
- ``executables``: executables added, removed, or whose ``mode``, ``placement`` or
  ``nodes`` changed.
- ``start``, ``stop``, ``restart``: the node ids each action touches, derived from the
  above: what ``topo apply`` carries out.

Every :class:`Change` says whether applying it live needs the replicas it touches
restarted (``needs_restart``): a node's construction (target, arguments, handles,
process environment, RPC server, executable, seed) is fixed once it runs; supervision
settings (restart policy, timeouts, ``stops_program``, descriptions), stop and snapshot
settings and parameters themselves are not (a parameter acts through the arguments it
changes, which are listed where they change). A handle to a whole group (``"@actor"``,
a :class:`~topo.ir.values.GroupRef`) is a live view of the group's members in a running
node: when only its members change, the change (``via`` ``group``) restarts nothing. A
kept executable whose mode, placement or set of nodes changes restarts the nodes it keeps:
threads are not moved in or out of a running process.

JSON (``topo diff --json``, :func:`topo.ir.diff_printer.diff_to_dict`)::

    {"equal": bool,
     "program": [CHANGE, ...],
     "groups": [{"group": str, "op": "+"|"~"|"-", "count": [old, new],
                 "changes": [CHANGE, ...],
                 "nodes": [{"node": str, "op": "+"|"~"|"-",
                            "effect": "start"|"stop"|"restart"|"none",
                            "changes": [CHANGE, ...]}, ...]}, ...],
     "executables": [{"executable": str, "op": "+"|"~"|"-", "changes": [CHANGE, ...]}],
     "start": [node id, ...], "stop": [...], "restart": [...]}
    CHANGE = {"path": str, "op": "+"|"~"|"-", "old": VALUE, "new": VALUE,
              "needs_restart": bool, "via": str}

``VALUE`` is the IR's JSON form of a value (a handle is ``{"$ref": node}``); ``old`` is
null when ``op`` is ``+``, ``new`` null when it is ``-``; ``via`` is "" except on wiring
changes (``ref``, ``round_robin``, ``fallback``, ``source``, ``primary``; ``"ref →
round_robin"`` when a handle keeps its node but changes how it is wired).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

from topo.ir.program import Edge, Executable, Group, Node, Program
from topo.ir.values import FrozenMap, GroupRef, Ref, Value

Op = Literal["+", "~", "-"]  # added, changed, removed
Effect = Literal["start", "stop", "restart", "none"]

__all__ = [
    "Change",
    "Effect",
    "ExecutableDiff",
    "GroupDiff",
    "NodeDiff",
    "Op",
    "ProgramDiff",
    "diff_programs",
]


@dataclass(frozen=True, slots=True)
class Change:
    """One field that differs: ``path`` (``restart.policy``, ``config.lr``, ``sources[1]``),
    its old and new values (None for the side where it is absent: ``op`` ``+`` / ``-``),
    whether applying it restarts what it touches, and for a handle how it is wired."""

    path: str
    old: Value
    new: Value
    op: Op = "~"
    needs_restart: bool = False
    via: str = ""  # wiring changes: the edge's via (new side, else old)


@dataclass(frozen=True, slots=True)
class NodeDiff:
    """A node that starts (``+``), stops (``-``) or changes (``~``, with its changes)."""

    node: str
    op: Op
    effect: Effect
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupDiff:
    """A group added, removed or changed: its count (old, new; 0 when absent), its own
    setting changes, and its nodes that start, stop or change."""

    group: str
    op: Op
    count: tuple[int, int]
    changes: tuple[Change, ...] = ()
    nodes: tuple[NodeDiff, ...] = ()


@dataclass(frozen=True, slots=True)
class ExecutableDiff:
    """An executable added, removed, or whose mode, placement or nodes changed."""

    executable: str
    op: Op
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True, slots=True)
class ProgramDiff:
    """Everything that differs between two programs, and the node ids to start, stop and
    restart to turn a program running the old one into the new one. ``restart`` holds
    every kept node a restarting change touches: its own (a :class:`NodeDiff`), its
    group's settings, its executable's, or the program seed's; the nodes it does not
    name keep running untouched."""

    program: tuple[Change, ...] = ()
    groups: tuple[GroupDiff, ...] = ()
    executables: tuple[ExecutableDiff, ...] = ()
    start: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    restart: tuple[str, ...] = ()

    @property
    def equal(self) -> bool:
        """Whether the two programs are the same (nothing to show, nothing to do)."""
        return not (self.program or self.groups or self.executables)


# -- which settings restart what they touch ---------------------------------------------

# Group settings a running replica was built with; the others act on supervision only.
_GROUP_RESTART = ("kind", "target", "per_process", "resources", "rpc", "primary")
# Group fields no plan shows: where it was written, how it is drawn, derived from count.
_GROUP_SKIP = frozenset({"name", "count", "singleton", "origin", "draw", "label"})
# Node fields compared apart from these (group, replica: the id says them; args, posargs:
# by path; seed: unless the program seed changed).
_NODE_SKIP = frozenset({"id", "group", "replica", "args", "posargs", "seed"})


def _flat(obj: Any, prefix: str = "") -> Iterator[tuple[str, Value]]:
    """``(path, value)`` for every leaf of a settings dataclass; mappings (``env``) are
    opened key by key, other values (tuples, scalars) are leaves."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from _flat(getattr(obj, f.name), f"{prefix}{f.name}.")
    elif isinstance(obj, FrozenMap) and prefix:
        for key, value in obj.items():
            yield from _flat(value, f"{prefix}{key}.")
    else:
        yield prefix.rstrip("."), obj


def _compare(
    old: Iterable[tuple[str, Value]], new: Iterable[tuple[str, Value]], restart: Any
) -> list[Change]:
    """The changes between two flat ``(path, value)`` listings; ``restart(path)`` says
    whether a change at ``path`` needs a restart."""
    before, after = dict(old), dict(new)
    out = []
    for path in _merged(before, after):
        if path not in after:
            out.append(Change(path, before[path], None, "-", restart(path)))
        elif path not in before:
            out.append(Change(path, None, after[path], "+", restart(path)))
        elif _differ(before[path], after[path]):
            out.append(Change(path, before[path], after[path], "~", restart(path)))
    return out


def _differ(a: Value, b: Value) -> bool:
    """Whether two setting values differ (``5`` and ``5.0`` are one number; ``1`` and
    ``true`` are not one value)."""
    return a != b or isinstance(a, bool) != isinstance(b, bool)


def _merged(before: Iterable[str], after: Iterable[str]) -> list[str]:
    """The keys of both, in ``after``'s order, a key only ``before`` has placed where it
    stood there (after the keys that preceded it)."""
    later = list(after)
    where = {key: i for i, key in enumerate(later)}
    out: list[str] = []
    taken = 0
    for key in before:
        if key in where:
            out += later[taken : where[key] + 1]
            taken = max(taken, where[key] + 1)
        else:
            out.append(key)
    out += later[taken:]
    return list(dict.fromkeys(out))


def _value_changes(old: Value, new: Value, path: str) -> Iterator[tuple[str, Value, Value, Op]]:
    """Where two argument values differ: mappings key by key, tuples of one length item by
    item; a tuple whose length changed is one change of the whole, and so is a group
    reference whose members changed."""
    if old == new and type(old) is type(new):
        return
    if isinstance(old, GroupRef) or isinstance(new, GroupRef):
        if (isinstance(old, GroupRef) and isinstance(new, GroupRef)) or old != new:
            yield path, old, new, "~"
        return
    if isinstance(old, FrozenMap) and isinstance(new, FrozenMap):
        for key in _merged(old, new):
            sub = f"{path}.{key}" if path else key
            if key not in new:
                yield sub, old[key], None, "-"
            elif key not in old:
                yield sub, None, new[key], "+"
            else:
                yield from _value_changes(old[key], new[key], sub)
    elif isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from _value_changes(a, b, f"{path}[{i}]")
    else:
        yield path, old, new, "~"


def _group_changes(old: Group, new: Group) -> list[Change]:
    fields = [f.name for f in dataclasses.fields(Group) if f.name not in _GROUP_SKIP]

    def leaves(g: Group) -> Iterator[tuple[str, Value]]:
        for name in fields:
            yield from _flat(getattr(g, name), f"{name}.")

    return _compare(leaves(old), leaves(new), lambda p: p.split(".")[0] in _GROUP_RESTART)


def _edges_by_src(program: Program) -> dict[str, dict[str, Edge]]:
    out: dict[str, dict[str, Edge]] = {}
    for edge in program.edges:
        out.setdefault(edge.src, {})[edge.arg] = edge
    return out


def _seed_leaf(value: Value, seed: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value == seed


def _node_changes(
    old: Node,
    new: Node,
    old_edges: dict[str, Edge],
    new_edges: dict[str, Edge],
    reseeded: bool,
) -> list[Change]:
    """What differs in a node present in both programs (its group's settings apart)."""
    changes: list[Change] = []
    fields = [f.name for f in dataclasses.fields(Node) if f.name not in _NODE_SKIP]

    both_rpc = old.rpc is not None and new.rpc is not None  # else: all of it, or none

    def leaves(n: Node) -> Iterator[tuple[str, Value]]:
        for name in fields:
            value = getattr(n, name)
            if name == "rpc" and both_rpc:
                yield from _flat(value, "rpc.")
            elif name == "rpc" and value is not None:
                yield name, FrozenMap(dict(_flat(value)))
            else:
                yield name, value

    changes += _compare(leaves(old), leaves(new), lambda _: True)
    if old.seed != new.seed and not reseeded:
        changes.append(Change("seed", old.seed, new.seed, "~", True))
    wired = {**old_edges, **new_edges}
    said: list[str] = []
    found = [
        *_value_changes(old.args, new.args, ""),
        *_value_changes(old.posargs, new.posargs, "posargs"),
    ]
    for path, a, b, op in found:
        if reseeded and _seed_leaf(a, old.seed) and _seed_leaf(b, new.seed):
            continue  # derived from the program seed, whose change is said once
        if _same_group(a, b):  # a live view of the group: it follows, nothing restarts
            changes.append(Change(path, a, b, op, False, "group"))
            said.append(path)
            continue
        edge = new_edges.get(path) or old_edges.get(path) if path in wired else None
        changes.append(Change(path, a, b, op, True, edge.via if edge else ""))
        said.append(path)
    for path in dict.fromkeys([*old_edges, *new_edges]):
        before, after = old_edges.get(path), new_edges.get(path)
        if before == after or path in said or _under(path, said):
            continue
        if before is not None and after is not None and before.dst == after.dst:
            via = f"{before.via} → {after.via}"
            changes.append(Change(path, _ref(before), _ref(after), "~", True, via))
        elif after is None:
            assert before is not None
            changes.append(Change(path, _ref(before), None, "-", True, before.via))
        else:
            op = "+" if before is None else "~"
            changes.append(Change(path, _ref(before), _ref(after), op, True, after.via))
    return changes


def _same_group(old: Value, new: Value) -> bool:
    """Whether both values reference one group as a whole (its members may differ)."""
    return isinstance(old, GroupRef) and isinstance(new, GroupRef) and old.group == new.group


def _ref(edge: Edge | None) -> Value:
    return None if edge is None else Ref(edge.dst)


def _under(path: str, parents: list[str]) -> bool:
    """Whether ``path`` lies inside one of ``parents`` (``sources[2]`` in ``sources``)."""
    return any(path.startswith((p + ".", p + "[")) for p in parents)


def _program_changes(old: Program, new: Program) -> list[Change]:
    def leaves(p: Program) -> Iterator[tuple[str, Value]]:
        yield "name", p.name
        yield "seed", p.seed
        yield from _flat(p.stop, "stop.")
        yield from _flat(p.snapshots, "snapshots.")

    changes = _compare(leaves(old), leaves(new), lambda path: path == "seed")
    changes += [
        Change(f"params.{path}", a, b, op)
        for path, a, b, op in _value_changes(old.params, new.params, "")
    ]
    return changes


def _executable_changes(
    old: Program, new: Program
) -> tuple[list[ExecutableDiff], dict[str, list[Change]]]:
    """Executables added, removed and changed; and for each node a kept executable
    restarts, the change that restarts it."""
    before, after = old.executable_index, new.executable_index
    out: list[ExecutableDiff] = []
    touched: dict[str, list[Change]] = {}

    def leaves(e: Executable) -> Iterator[tuple[str, Value]]:
        yield "mode", e.mode
        yield "placement", e.placement
        yield "nodes", e.nodes

    for exe in new.executables:
        was = before.get(exe.id)
        if was is None:
            out.append(ExecutableDiff(exe.id, "+", tuple(_compare((), leaves(exe), _no))))
        elif was != exe:
            changes = _compare(leaves(was), leaves(exe), lambda _: True)
            out.append(ExecutableDiff(exe.id, "~", tuple(changes)))
            for node_id in exe.nodes:
                if node_id in was.nodes:
                    touched.setdefault(node_id, []).extend(
                        dataclasses.replace(c, path=f"executable.{c.path}") for c in changes
                    )
    for exe in old.executables:
        if exe.id not in after:
            out.append(ExecutableDiff(exe.id, "-", tuple(_compare(leaves(exe), (), _no))))
    return out, touched


def _no(_: str) -> bool:
    return False


def diff_programs(old: Program, new: Program) -> ProgramDiff:
    """Everything that differs between ``old`` and ``new``, structurally (see the module
    docstring for the parts and what each change needs)."""
    program = _program_changes(old, new)
    reseeded = old.seed != new.seed
    executables, exe_touched = _executable_changes(old, new)
    old_edges, new_edges = _edges_by_src(old), _edges_by_src(new)
    old_nodes, new_nodes = old.node_index, new.node_index
    groups: list[GroupDiff] = []
    start: list[str] = []
    stop: list[str] = []
    restart: list[str] = []
    names = dict.fromkeys([g.name for g in new.groups] + [g.name for g in old.groups])
    for name in names:
        was, now = old.group_index.get(name), new.group_index.get(name)
        old_ids = [n.id for n in old.nodes_of(name)] if was else []
        new_ids = [n.id for n in new.nodes_of(name)] if now else []
        if was is None or now is None:
            op: Op = "+" if was is None else "-"
            effect: Effect = "start" if was is None else "stop"
            ids = new_ids or old_ids
            (start if was is None else stop).extend(ids)
            count = (0, now.count) if now else (was.count if was else 0, 0)
            nodes = tuple(NodeDiff(i, op, effect) for i in ids)
            groups.append(GroupDiff(name, op, count, (), nodes))
            continue
        settings = _group_changes(was, now)
        group_restart = any(c.needs_restart for c in settings)
        kept = set(old_ids)
        node_diffs: list[NodeDiff] = []
        for node_id in new_ids:
            if node_id not in kept:
                node_diffs.append(NodeDiff(node_id, "+", "start"))
                start.append(node_id)
                continue
            a, b = old_nodes[node_id], new_nodes[node_id]
            a_edges, b_edges = old_edges.get(node_id, {}), new_edges.get(node_id, {})
            changes: list[Change] = []
            if a != b or a_edges != b_edges:
                changes = _node_changes(a, b, a_edges, b_edges, reseeded)
            changes += exe_touched.get(node_id, [])
            if changes:
                node_diffs.append(NodeDiff(node_id, "~", _effect(changes), tuple(changes)))
            if group_restart or reseeded or any(c.needs_restart for c in changes):
                restart.append(node_id)
        now_ids = set(new_ids)
        for node_id in old_ids:
            if node_id not in now_ids:
                node_diffs.append(NodeDiff(node_id, "-", "stop"))
                stop.append(node_id)
        if settings or node_diffs or was.count != now.count:
            groups.append(
                GroupDiff(name, "~", (was.count, now.count), tuple(settings), tuple(node_diffs))
            )
    return ProgramDiff(
        tuple(program),
        tuple(groups),
        tuple(executables),
        tuple(start),
        tuple(stop),
        tuple(restart),
    )


def _effect(changes: list[Change]) -> Effect:
    return "restart" if any(c.needs_restart for c in changes) else "none"
