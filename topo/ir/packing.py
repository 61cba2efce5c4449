"""Packing nodes into executables (the unit a backend starts), and how executables are
named, for every front end.

A front end says which nodes go together as :class:`Colocation` requests -- a YAML
``colocation:`` entry, a Launchpad colocation -- and which groups pack their replicas
``per_process``; :func:`pack` gives the executables in start order and the problems
(keyed by request index, group or executable, see :mod:`topo.ir.checks`). Executable ids:
a node alone is its own id, consecutive replicas packed together ``group/a-b``, a thread
set its name or its groups' names joined with ``+``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from topo.ir.checks import Problem
from topo.ir.program import Executable, Program

__all__ = [
    "Colocation",
    "Packing",
    "as_applied",
    "consecutive_replicas",
    "group_of",
    "keep_running",
    "pack",
    "replicas_id",
    "set_name",
]

ColocationRequest = Literal["threads", "replicas", "host"]


@dataclass(frozen=True, slots=True)
class Colocation:
    """Nodes placed together: as threads of one process (``threads``, an executable of mode
    ``set``), as consecutive replicas of one group packed into one process (``replicas``),
    or as processes on one host (``host``). An empty ``name`` is made from the nodes."""

    nodes: tuple[str, ...]
    mode: ColocationRequest = "threads"
    name: str = ""


@dataclass
class Packing:
    """Executables in start order, node id -> executable id, and what is wrong."""

    executables: list[Executable]
    node_exe: dict[str, str]
    problems: list[Problem] = field(default_factory=list)


def group_of(node_id: str) -> str:
    """``actor/3`` -> ``actor``; a singleton's id is its group's name."""
    return node_id.split("/")[0]


def set_name(nodes: Sequence[str]) -> str:
    """The default name of a set of nodes: their groups' names, in order, joined by ``+``."""
    return "+".join(dict.fromkeys(group_of(n) for n in nodes))


def replicas_id(nodes: Sequence[str]) -> str:
    """The id of the executable holding consecutive replicas ``g/a`` ... ``g/b``: ``g/a-b``,
    or the node's own id when it holds one."""
    if len(nodes) == 1:
        return nodes[0]
    group, first = nodes[0].rsplit("/", 1)
    return f"{group}/{first}-{nodes[-1].rsplit('/', 1)[1]}"


def consecutive_replicas(nodes: Sequence[str]) -> bool:
    """Whether ``nodes`` are replicas ``g/i``, ``g/i+1``, ... of one group (or one node)."""
    if len(nodes) == 1:
        return True
    group, _, start = nodes[0].rpartition("/")
    if not group or not start.isdigit():
        return False
    return list(nodes) == [f"{group}/{i}" for i in range(int(start), int(start) + len(nodes))]


@dataclass
class _Sets:
    """What the requests ask for, by node: thread sets and host placements."""

    thread_set: dict[str, str] = field(default_factory=dict)  # node -> thread set name
    members: dict[str, list[str]] = field(default_factory=dict)  # thread set -> nodes
    modes: dict[str, Literal["set", "replicas"]] = field(default_factory=dict)  # thread set ->
    placement: dict[str, str] = field(default_factory=dict)  # node -> host set name


def pack(
    node_ids: Mapping[str, Sequence[str]],
    colocation: Sequence[Colocation],
    *,
    per_process: Mapping[str, int] | None = None,
    spread: Collection[str] = (),
) -> Packing:
    """Executables for the nodes of ``node_ids`` (group -> its node ids, in program order):
    groups in ``per_process`` cut into chunks of k replicas, thread sets where their first
    member stands, one executable for every other node; then host placements. ``spread``
    names the groups whose processes must each go to a host of their own."""
    per_process = per_process or {}
    sets = _Sets()
    problems: list[Problem] = []
    for i, request in enumerate(colocation):
        _add(i, request, per_process, sets, problems)
    executables, node_exe = _executables(node_ids, per_process, sets)
    placed = _place(executables, node_exe, sets.placement, problems)
    problems.extend(_check_spread(spread, sets.placement))
    problems.extend(_check_unique(placed))
    return Packing(placed, node_exe, problems)


def _add(
    i: int,
    request: Colocation,
    per_process: Mapping[str, int],
    sets: _Sets,
    problems: list[Problem],
) -> None:
    """Record request ``i``: refuse a second thread set of the same name, a node packed
    twice, and a group both packed per process and in a thread set."""
    members = list(request.nodes)
    if not members:
        return
    threads = request.mode != "host"
    if request.name:
        name = request.name
    else:
        name = replicas_id(members) if request.mode == "replicas" else set_name(members)
    if threads and name in sets.members:
        problems.append(
            Problem(
                f"two thread colocation sets are named '{name}'",
                "give each set its own name: field",
                colocation=i,
            )
        )
        return
    taken = sets.thread_set if threads else sets.placement
    mode = "threads" if threads else "host"
    for node in members:
        if node in taken:
            problems.append(
                Problem(
                    f"node '{node}' is in two {mode} colocation sets "
                    f"('{taken[node]}' and '{name}')",
                    "a node can be packed into only one process"
                    if threads
                    else "a node can be placed with only one host set",
                    colocation=i,
                    setting=("nodes",),
                    node=node,
                )
            )
            continue
        taken[node] = name
    if not threads:
        return
    for node in members:
        group = group_of(node)
        if group in per_process:
            problems.append(
                Problem(
                    f"group '{group}' packs its replicas with colocate.per_process and "
                    f"also appears in colocation set '{name}'",
                    "use one or the other for a group",
                    group=group,
                    colocation=i,
                    setting=("nodes",),
                )
            )
            break
    sets.members.setdefault(name, []).extend(n for n in members if sets.thread_set.get(n) == name)
    sets.modes[name] = "replicas" if request.mode == "replicas" else "set"


def _executables(
    node_ids: Mapping[str, Sequence[str]], per_process: Mapping[str, int], sets: _Sets
) -> tuple[list[Executable], dict[str, str]]:
    """Executables in group order: per-process chunks, thread sets (where their first member
    stands), and one executable per remaining node."""
    executables: list[Executable] = []
    node_exe: dict[str, str] = {}
    emitted_sets: set[str] = set()
    for group, ids in node_ids.items():
        k = per_process.get(group)
        if k is not None:
            for start in range(0, len(ids), k):
                chunk = tuple(ids[start : start + k])
                exe_id = replicas_id(chunk)
                executables.append(Executable(exe_id, chunk, "replicas"))
                node_exe.update({n: exe_id for n in chunk})
            continue
        for node in ids:
            name = sets.thread_set.get(node)
            if name is None:
                executables.append(Executable(node, (node,), "single"))
                node_exe[node] = node
            elif name not in emitted_sets:
                emitted_sets.add(name)
                together = tuple(sets.members[name])
                executables.append(Executable(name, together, sets.modes[name]))
                node_exe.update({n: name for n in together})
    return executables, node_exe


def _place(
    executables: list[Executable],
    node_exe: dict[str, str],
    placement: dict[str, str],
    problems: list[Problem],
) -> list[Executable]:
    """Host placement: every executable holding a node of a host set gets its name."""
    exe_placement: dict[str, str] = {}
    for node, name in placement.items():
        exe = node_exe.get(node)
        if exe is None:
            continue
        if exe_placement.get(exe, name) != name:
            problems.append(
                Problem(
                    f"executable '{exe}' would have to run on two host sets "
                    f"('{exe_placement[exe]}' and '{name}')",
                    executable=exe,
                )
            )
            continue
        exe_placement[exe] = name
    return [Executable(e.id, e.nodes, e.mode, exe_placement.get(e.id)) for e in executables]


def _check_spread(spread: Collection[str], placement: dict[str, str]) -> list[Problem]:
    """A spread group's processes go to distinct hosts: none of its nodes may be in a
    host-colocation set as well (the set's host would decide for it)."""
    problems = []
    for group in spread:
        placed = sorted({name for node, name in placement.items() if group_of(node) == group})
        if placed:
            problems.append(
                Problem(
                    f"group '{group}' sets resources.spread, so each of its processes picks "
                    f"its own host, but nodes of it are in host-colocation set "
                    f"{', '.join(repr(p) for p in placed)}",
                    "drop spread, or take the group's nodes out of the `mode: host` set",
                    group=group,
                    setting=("resources", "spread"),
                )
            )
    return problems


def _check_unique(executables: list[Executable]) -> list[Problem]:
    """Every executable id once."""
    seen: dict[str, int] = {}
    for e in executables:
        seen[e.id] = seen.get(e.id, 0) + 1
    return [
        Problem(
            f"two executables would be named '{exe_id}'",
            "give the colocation set a name (name: ...) that differs from every node id",
            executable=exe_id,
        )
        for exe_id, times in seen.items()
        if times > 1
    ]


# -- a change to a running program keeps its processes ---------------------------------


def _chunk_sizes(exes: Sequence[Executable]) -> dict[str, int]:
    """Group -> how many replicas its per-process executables hold (the largest chunk:
    the last one may be shorter)."""
    out: dict[str, int] = {}
    for e in exes:
        if e.mode == "replicas":
            g = group_of(e.nodes[0])
            out[g] = max(out.get(g, 0), len(e.nodes))
    return out


def _kept(
    old: Executable, new_of: Mapping[str, Executable], old_k: dict[str, int], new_k: dict[str, int]
) -> bool:
    """Whether executable ``old`` of a running program can go on as it is under the new
    packing: all its nodes stay, each packed the same way -- alone, in the same thread
    set, or as replicas of a group still packed ``per_process`` by the same number --
    on the same host set."""
    mine = [new_of.get(n) for n in old.nodes]
    if any(e is None or e.placement != old.placement for e in mine):
        return False
    if old.mode == "replicas":
        group = group_of(old.nodes[0])
        same_k = old_k.get(group) == new_k.get(group)
        return same_k and all(e is not None and e.mode == "replicas" for e in mine)
    return all(e == old for e in mine)


def _runs(nodes: Sequence[str]) -> list[list[str]]:
    """``nodes`` cut into runs of consecutive replicas of one group (others alone)."""
    out: list[list[str]] = []
    for node in nodes:
        if out and consecutive_replicas([*out[-1], node]):
            out[-1].append(node)
        else:
            out.append([node])
    return out


def keep_running(running: Sequence[Executable], new: Sequence[Executable]) -> list[Executable]:
    """The executables of a new packing (``new``) rearranged for a program already running
    ``running``: every running executable that can go on unchanged is kept (``_kept``),
    and the nodes left are packed as ``new`` packs them, per-process replicas re-chunked
    among themselves (``topo apply`` then starts only what is new, e.g. 4 more actors
    packed 2 per process, without moving the actors already running). Order: ``new``'s."""
    new_of = {n: e for e in new for n in e.nodes}
    per, old_per = _chunk_sizes(new), _chunk_sizes(running)
    kept = {e.id: e for e in running if _kept(e, new_of, old_per, per)}
    kept_of = {n: e for e in kept.values() for n in e.nodes}
    pooled: dict[str, list[str]] = {}  # group -> its per-process replicas left, in order
    for exe in new:
        if exe.mode == "replicas":
            pooled.setdefault(group_of(exe.nodes[0]), []).extend(
                n for n in exe.nodes if n not in kept_of
            )
    out: list[Executable] = []
    emitted: set[str] = set()
    for exe in new:
        for node in exe.nodes:
            keep = kept_of.get(node)
            if keep is not None and keep.id not in emitted:
                emitted.add(keep.id)
                out.append(keep)
        if exe.mode != "replicas":
            if not any(n in kept_of for n in exe.nodes):
                out.append(exe)
            continue
        group = group_of(exe.nodes[0])
        if group not in pooled:
            continue  # its chunks were made at its first executable
        for other in new:  # the group's kept executables first, then its new chunks
            if other.mode == "replicas" and group_of(other.nodes[0]) == group:
                for node in other.nodes:
                    keep = kept_of.get(node)
                    if keep is not None and keep.id not in emitted:
                        emitted.add(keep.id)
                        out.append(keep)
        rest = pooled.pop(group)
        k = per[group]
        for run in _runs(rest):
            for start in range(0, len(run), k):
                chunk = tuple(run[start : start + k])
                out.append(Executable(replicas_id(chunk), chunk, "replicas", exe.placement))
    return out


def as_applied(running: Program, new: Program) -> Program:
    """``new`` as ``topo apply`` would run it on top of ``running``: its executables
    arranged by :func:`keep_running` (each node's ``executable`` follows)."""
    exes = keep_running(running.executables, new.executables)
    if tuple(exes) == new.executables:
        return new
    exe_of = {n: e.id for e in exes for n in e.nodes}
    nodes = tuple(
        n if n.executable == exe_of[n.id] else dataclasses.replace(n, executable=exe_of[n.id])
        for n in new.nodes
    )
    return dataclasses.replace(new, nodes=nodes, executables=tuple(exes))
