"""Groups and executables of an exported program: which IR nodes form each YAML group,
their new ids, and how executables become ``colocate:`` and ``colocation:`` entries.

A group of the IR may hold nodes of different kinds or targets (a Launchpad label
holding a counter and a steps limiter). YAML groups have one target, so such a group is
split: the nodes sharing the first node's (kind, target) keep the name, the others go
to groups named after their target (``StepsLimiter`` -> ``steps_limiter``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from topo.ir import Executable, Group, Node, Program
from topo.kinds import UnknownKindError, get_kind

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


@dataclass
class OutGroup:
    """A YAML group: IR nodes of one (kind, target), from one IR group."""

    name: str
    origin: Group  # the IR group the nodes come from
    kind: str
    target: str
    nodes: list[Node]
    singleton: bool
    per_process: int | None = None


@dataclass
class Layout:
    """The exported groups, node renames and colocation."""

    groups: list[OutGroup]
    node_ids: dict[str, str]  # IR node id -> exported node id
    group_of: dict[str, OutGroup]  # IR node id -> its exported group
    replica_of: dict[str, int]  # IR node id -> its replica in the exported group
    executable_ids: dict[str, str] = field(default_factory=dict)  # IR exe id -> exported
    colocation: list[dict[str, Any]] = field(default_factory=list)

    def ref(self, node_id: str) -> str:
        """The YAML reference to one IR node: ``@group`` or ``@group[i]``."""
        g = self.group_of[node_id]
        return f"@{g.name}" if g.singleton else f"@{g.name}[{self.replica_of[node_id]}]"


def snake_name(target: str) -> str:
    """``pkg.mod:StepsLimiter`` -> ``steps_limiter``; ``mod:build_replay`` -> ``replay``."""
    name = target.rpartition(":")[2].rpartition(".")[2] or "node"
    name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower()
    for prefix in ("build_", "make_"):
        if name.startswith(prefix) and len(name) > len(prefix):
            name = name[len(prefix) :]
            break
    name = re.sub(r"[^a-z0-9_\-]", "_", name)
    return name if NAME.match(name) else f"_{name}"


def unique(name: str, taken: set[str]) -> str:
    """``name``, or ``name_2``, ``name_3``... when taken."""
    out, i = name, 2
    while out in taken:
        out, i = f"{name}_{i}", i + 1
    return out


def _split_name(program: Program, node: Node) -> str:
    """A split group's name: after its target, or for a kind with a built-in target (the
    same for every group of the kind) after the first target the kind's own fields import
    (a reverb's tables), else the kind's name."""
    name = program.kind_of(node.id)
    try:
        kind = get_kind(name)
    except UnknownKindError:
        kind = None
    target = program.target_of(node.id)
    if kind is not None and kind.builtin_target is not None:
        fields, _ = kind.split_args(node.args)
        imported = [fields.get(f) for f in kind.import_fields]
        target = next((t for t in imported if isinstance(t, str)), "")
    return snake_name(target) if target else name


def split_groups(program: Program) -> Layout:
    """The exported groups in IR order, split parts right after the group they came from."""
    taken = {g.name for g in program.groups}
    out: list[OutGroup] = []
    for g in program.groups:
        members = program.nodes_of(g.name)
        parts: dict[tuple[str, str, bool], list[Node]] = {}
        for n in members:
            key = (program.kind_of(n.id), program.target_of(n.id), n.factory is not None)
            parts.setdefault(key, []).append(n)
        if not parts:
            out.append(OutGroup(g.name, g, g.kind, g.target, [], g.singleton))
            continue
        for i, ((kind, target, _), nodes) in enumerate(parts.items()):
            if i == 0:
                name = g.name
            else:
                name = unique(_split_name(program, nodes[0]), taken)
                taken.add(name)
            singleton = len(nodes) == 1 and (g.singleton or len(parts) > 1)
            out.append(OutGroup(name, g, kind, target, nodes, singleton))
    node_ids: dict[str, str] = {}
    group_of: dict[str, OutGroup] = {}
    replica_of: dict[str, int] = {}
    for og in out:
        for i, n in enumerate(og.nodes):
            node_ids[n.id] = og.name if og.singleton else f"{og.name}/{i}"
            group_of[n.id] = og
            replica_of[n.id] = i
    layout = Layout(out, node_ids, group_of, replica_of)
    _colocate(program, layout)
    return layout


def _per_process(og: OutGroup, exes: dict[str, Executable], exe_of: dict[str, str]) -> int | None:
    """k when the group's nodes, in replica order, fill ``replicas`` executables of their
    own k at a time (the last may hold fewer), as ``colocate: {per_process: k}`` packs."""
    if not og.nodes:
        return None
    chunks: list[list[str]] = []
    for n in og.nodes:
        exe = exes[exe_of[n.id]]
        if exe.mode != "replicas" or exe.placement is not None:
            return None
        if not chunks or exe_of[chunks[-1][-1]] != exe.id:
            chunks.append([])
        chunks[-1].append(n.id)
    for chunk in chunks:
        if list(exes[exe_of[chunk[0]]].nodes) != chunk:
            return None  # the executable holds nodes of other groups, or out of order
    k = len(chunks[0])
    if any(len(c) != k for c in chunks[:-1]) or len(chunks[-1]) > k:
        return None
    return k


def refs_for(layout: Layout, ir_nodes: list[str]) -> list[str]:
    """References naming exactly ``ir_nodes``: ``@g`` for a whole group, else one each."""
    out: list[str] = []
    i = 0
    while i < len(ir_nodes):
        og = layout.group_of[ir_nodes[i]]
        whole = [n.id for n in og.nodes]
        if len(whole) > 1 and ir_nodes[i : i + len(whole)] == whole:
            out.append(f"@{og.name}")
            i += len(whole)
        else:
            out.append(layout.ref(ir_nodes[i]))
            i += 1
    return out


def _colocate(program: Program, layout: Layout) -> None:
    """``per_process`` for groups packed k to a process; ``colocation:`` entries for
    every other thread set and every host placement; the executable renames."""
    exes = {e.id: e for e in program.executables}
    exe_of = {n: e.id for e in program.executables for n in e.nodes}
    for og in layout.groups:
        og.per_process = _per_process(og, exes, exe_of)
    packed = {n.id for og in layout.groups if og.per_process for n in og.nodes}
    sets: list[Executable] = []
    for e in program.executables:
        if e.nodes[0] in packed:
            og = layout.group_of[e.nodes[0]]
            ids = [layout.node_ids[n] for n in e.nodes]
            first, last = layout.replica_of[e.nodes[0]], layout.replica_of[e.nodes[-1]]
            layout.executable_ids[e.id] = ids[0] if len(ids) == 1 else f"{og.name}/{first}-{last}"
        elif len(e.nodes) == 1 and e.mode == "single":
            layout.executable_ids[e.id] = layout.node_ids[e.nodes[0]]
        else:
            sets.append(e)
    taken = set(layout.executable_ids.values())
    for e in sets:
        name = e.id if NAME.match(e.id) else re.sub(r"[^A-Za-z0-9_\-]", "_", e.id)
        name = unique(name if NAME.match(name) else f"_{name}", taken)
        taken.add(name)
        layout.executable_ids[e.id] = name
        layout.colocation.append({"name": name, "nodes": refs_for(layout, list(e.nodes))})
    placements: dict[str, list[str]] = {}
    for e in program.executables:
        if e.placement is not None:
            placements.setdefault(e.placement, []).extend(e.nodes)
    host_taken: set[str] = set()
    for tag, nodes in placements.items():
        name = unique(tag if NAME.match(tag) else "host", host_taken)
        host_taken.add(name)
        layout.colocation.append({"name": name, "nodes": refs_for(layout, nodes), "mode": "host"})
