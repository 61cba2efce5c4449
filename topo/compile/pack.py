"""Colocation: packing nodes into executables (the unit a backend starts)."""

from __future__ import annotations

from dataclasses import dataclass

from topo.compile.refs import GroupTable, RefError
from topo.diagnostics import Diagnostic
from topo.ir import Executable, Group
from topo.spec.models import ColocationSpec
from topo.spec.source import SourceMap


@dataclass
class Packing:
    """Executables in start order, and node id -> executable id."""

    executables: list[Executable]
    node_exe: dict[str, str]


def _set_name(spec: ColocationSpec, members: list[str]) -> str:
    if spec.name:
        return spec.name
    groups: list[str] = []
    for node in members:
        group = node.split("/")[0]
        if group not in groups:
            groups.append(group)
    return "+".join(groups)


def pack(
    groups: list[Group],
    table: GroupTable,
    colocation: list[ColocationSpec],
    sources: SourceMap,
    errors: list[Diagnostic],
) -> Packing:
    """Thread sets first, then per-process chunks, then one executable per remaining node."""
    thread_set: dict[str, str] = {}  # node -> set name
    set_members: dict[str, list[str]] = {}
    placement: dict[str, str] = {}  # node -> host set name
    for i, spec in enumerate(colocation):
        members: list[str] = []
        for j, entry in enumerate(spec.nodes):
            where = sources.pos(("colocation", i, "nodes", j))
            try:
                members.extend(table.resolve_nodes(entry))
            except RefError as exc:
                errors.append(Diagnostic(str(exc), where, exc.hint))
        if not members:
            continue
        name = _set_name(spec, members)
        if spec.mode == "threads" and name in set_members:
            errors.append(
                Diagnostic(
                    f"two thread colocation sets are named '{name}'",
                    sources.pos(("colocation", i)),
                    "give each set its own name: field",
                )
            )
            continue
        taken = thread_set if spec.mode == "threads" else placement
        for node in members:
            if node in taken:
                errors.append(
                    Diagnostic(
                        f"node '{node}' is in two {spec.mode} colocation sets "
                        f"('{taken[node]}' and '{name}')",
                        sources.pos(("colocation", i, "nodes")),
                        "a node can be packed into only one process"
                        if spec.mode == "threads"
                        else "a node can be placed with only one host set",
                    )
                )
                continue
            taken[node] = name
        if spec.mode == "threads":
            group_of = {g.name: g for g in groups}
            for node in members:
                g = group_of[node.split("/")[0]]
                if g.per_process is not None:
                    errors.append(
                        Diagnostic(
                            f"group '{g.name}' packs its replicas with colocate.per_process and "
                            f"also appears in colocation set '{name}'",
                            sources.pos(("colocation", i, "nodes")),
                            "use one or the other for a group",
                        )
                    )
                    break
            set_members.setdefault(name, [])
            set_members[name].extend(n for n in members if thread_set.get(n) == name)

    executables: list[Executable] = []
    node_exe: dict[str, str] = {}
    emitted_sets: set[str] = set()
    for group in groups:
        ids = table.node_ids.get(group.name, ())
        k = group.per_process
        if k is not None:
            for start in range(0, len(ids), k):
                chunk = ids[start : start + k]
                exe_id = (
                    chunk[0]
                    if len(chunk) == 1
                    else f"{group.name}/{start}-{start + len(chunk) - 1}"
                )
                executables.append(Executable(exe_id, tuple(chunk), "replicas"))
                for n in chunk:
                    node_exe[n] = exe_id
            continue
        for node in ids:
            set_name = thread_set.get(node)
            if set_name is None:
                executables.append(Executable(node, (node,), "single"))
                node_exe[node] = node
            elif set_name not in emitted_sets:
                emitted_sets.add(set_name)
                together = tuple(set_members[set_name])
                executables.append(Executable(set_name, together, "set"))
                for n in together:
                    node_exe[n] = set_name

    # Host placement: every executable holding a node of a host set gets its name.
    exe_placement: dict[str, str] = {}
    for node, name in placement.items():
        exe = node_exe.get(node)
        if exe is None:
            continue
        if exe_placement.get(exe, name) != name:
            errors.append(
                Diagnostic(
                    f"executable '{exe}' would have to run on two host sets "
                    f"('{exe_placement[exe]}' and '{name}')",
                    sources.pos(("colocation",)),
                )
            )
            continue
        exe_placement[exe] = name
    executables = [Executable(e.id, e.nodes, e.mode, exe_placement.get(e.id)) for e in executables]

    seen: dict[str, int] = {}
    for e in executables:
        seen[e.id] = seen.get(e.id, 0) + 1
    for exe_id, times in seen.items():
        if times > 1:
            errors.append(
                Diagnostic(
                    f"two executables would be named '{exe_id}'",
                    sources.pos(("colocation",)),
                    "give the colocation set a name (name: ...) that differs from every node id",
                )
            )
    return Packing(executables, node_exe)
