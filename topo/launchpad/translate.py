"""An ``lp.Program`` -> the Program IR that a YAML file compiles to, run by any backend.

Groups keep their labels (``program.groups['counter']`` may hold a counter and a steps
limiter: each node then carries its own kind and target). Positional arguments are bound
to parameter names where the constructor's signature allows, so edges are named as in
YAML; handles become references; any other object becomes an opaque value (imported by
name, or cloudpickled once however many nodes share it). Colocations become
executables: a group's thread colocations of equal size as ``per_process``, others as
named thread sets, ``MultiProcessingColocation`` as a host placement.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from topo.ir import (
    Edge,
    Executable,
    FrozenMap,
    Group,
    Node,
    Opaque,
    Program,
    Resources,
    RpcSettings,
    Value,
    iter_refs,
)
from topo.ir.seeds import derive_seeds
from topo.ir.values import import_path_of
from topo.kinds import get_kind
from topo.launchpad.arguments import ProgramError, Values, bind
from topo.launchpad.nodes.base import Node as LpNode
from topo.launchpad.nodes.kinds import (
    CourierNode,
    MultiProcessingColocation,
    MultiThreadingColocation,
)
from topo.launchpad.program import Program as LpProgram

__all__ = ["Compiled", "ProgramError", "bind", "compile_program", "group_name"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


@dataclass
class Compiled:
    """The IR of a Launchpad program and where each Launchpad node went."""

    program: Program
    node_ids: dict[int, str]  # Launchpad node uid -> IR node id
    nodes: dict[str, LpNode] = field(default_factory=dict)  # IR node id -> Launchpad node


def group_name(label: str, taken: set[str]) -> str:
    """A valid, unused group name for a Launchpad label (any text)."""
    name = label if _NAME.match(label) else re.sub(r"[^A-Za-z0-9_\-]", "_", label) or "group"
    if not re.match(r"[A-Za-z_]", name):
        name = "_" + name
    base, i = name, 2
    while name in taken:
        name, i = f"{base}_{i}", i + 1
    return name


@dataclass
class _Entry:
    """One Launchpad node placed in a group, before the IR node is made."""

    node: LpNode
    group: str
    exe: str = ""
    mode: str = "single"
    placement: str | None = None


def compile_program(
    program: LpProgram,
    *,
    resources: Mapping[str, Any] | None = None,
    seed: int = 0,
    live: Callable[[Any], str] | None = None,
) -> Compiled:
    """The Program IR of ``program``; ``resources`` maps labels to ``PythonProcess``
    (their ``env``); ``live`` keeps objects unpickled for thread nodes (it returns their
    import path). :class:`ProgramError` for a program that cannot run."""
    entries: list[_Entry] = []
    groups: dict[str, str] = {}  # label -> group name
    taken: set[str] = set()
    for label, added in program.groups.items():
        if not added:
            continue
        name = group_name(label, taken)
        taken.add(name)
        groups[label] = name
        for item in added:
            entries.extend(_entries(item, name))
    if not entries:
        raise ProgramError(f"program {program.name!r} has no nodes")
    seen: dict[int, _Entry] = {}
    for e in entries:
        if e.node.uid in seen:
            raise ProgramError(f"{e.node.describe()} is in the program twice")
        seen[e.node.uid] = e
    node_ids = _ids(entries)
    _name_executables(entries, node_ids)
    values = Values(node_ids, live)
    by_group: dict[str, list[_Entry]] = {}
    for e in entries:
        by_group.setdefault(e.group, []).append(e)
    seeds = derive_seeds(seed, [node_ids[e.node.uid] for e in entries])
    ir_groups: list[Group] = []
    nodes: list[Node] = []
    edges: list[Edge] = []
    labels = {v: k for k, v in groups.items()}
    env = _env(resources or {}, groups)
    for name, members in by_group.items():
        first = _made(members[0].node, values, node_ids[members[0].node.uid])
        group = Group(
            name=name,
            kind=first.kind,
            target=first.target,
            count=len(members),
            singleton=len(members) == 1,
            per_process=_per_process(members),
            resources=Resources(env=FrozenMap(env.get(name, {}))),
            rpc=first.rpc,
            label=labels[name] if labels[name] != name else "",
            draw=get_kind(first.kind).draw,
        )
        ir_groups.append(group)
        for replica, e in enumerate(members):
            node_id = node_ids[e.node.uid]
            made = first if replica == 0 else _made(e.node, values, node_id)
            nodes.append(
                Node(
                    id=node_id,
                    group=name,
                    replica=replica,
                    args=made.args,
                    seed=seeds[node_id],
                    executable=e.exe,
                    posargs=made.posargs,
                    kind="" if made.kind == group.kind else made.kind,
                    target="" if made.target == group.target or made.factory else made.target,
                    factory=made.factory,
                    disable_run=not e.node.should_run,
                    rpc=None if made.rpc == group.rpc else made.rpc,
                )
            )
            edges.extend(_edges(node_id, made))
    executables: dict[str, Executable] = {}
    for e in entries:
        exe = executables.get(e.exe)
        node_id = node_ids[e.node.uid]
        if exe is None:
            executables[e.exe] = Executable(e.exe, (node_id,), e.mode, e.placement)  # type: ignore[arg-type]
        else:
            executables[e.exe] = Executable(exe.id, (*exe.nodes, node_id), exe.mode, exe.placement)
    ir = Program(
        name=program.name if _NAME.match(program.name) else group_name(program.name, set()),
        seed=seed,
        params=FrozenMap(),
        groups=tuple(ir_groups),
        nodes=tuple(nodes),
        edges=tuple(edges),
        executables=tuple(executables.values()),
    )
    lp_nodes = {node_ids[e.node.uid]: e.node for e in entries}
    return Compiled(ir, node_ids, lp_nodes)


def _entries(item: LpNode, group: str) -> list[_Entry]:
    if isinstance(item, MultiProcessingColocation):
        tag = f"host-{item.uid}"
        return [_Entry(n, group, placement=tag) for n in item.nodes]
    if isinstance(item, MultiThreadingColocation):
        if not item.nodes:
            raise ProgramError(f"a MultiThreadingColocation in group {group!r} holds no node")
        tag = f"threads-{item.uid}"
        return [_Entry(n, group, exe=tag, mode="replicas") for n in item.nodes]
    return [_Entry(item, group)]


def _ids(entries: list[_Entry]) -> dict[int, str]:
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.group] = counts.get(e.group, 0) + 1
    index: dict[str, int] = {}
    out: dict[int, str] = {}
    for e in entries:
        i = index.get(e.group, 0)
        index[e.group] = i + 1
        out[e.node.uid] = e.group if counts[e.group] == 1 else f"{e.group}/{i}"
    return out


def _name_executables(entries: list[_Entry], node_ids: dict[int, str]) -> None:
    """Executable ids as the YAML compiler names them: a node's own id, ``group/a-b`` for
    replicas packed together, and the joined group names for a thread set."""
    tags: dict[str, list[_Entry]] = {}
    for e in entries:
        if not e.exe:
            e.exe = node_ids[e.node.uid]
        else:
            tags.setdefault(e.exe, []).append(e)
    taken = set(node_ids.values())
    for members in tags.values():
        ids = [node_ids[m.node.uid] for m in members]
        if len(members) == 1:
            name = ids[0]
        elif len({(m.group, _builder(m.node)) for m in members}) == 1 and all(
            node_ids[m.node.uid] == f"{m.group}/{i}"
            for m, i in zip(members, _consecutive(ids), strict=False)
        ):
            first, last = ids[0].rsplit("/", 1)[1], ids[-1].rsplit("/", 1)[1]
            name = f"{members[0].group}/{first}-{last}"
        else:
            for m in members:
                m.mode = "set"
            name = group_name("_".join(dict.fromkeys(m.group for m in members)), taken)
        taken.add(name)
        for m in members:
            m.exe = name


def _builder(node: LpNode) -> tuple[str, int]:
    """What makes nodes alike enough to be replicas packed together: kind and constructor."""
    return type(node).__name__, id(node.constructor)


def _consecutive(ids: list[str]) -> list[int]:
    try:
        start = int(ids[0].rsplit("/", 1)[1])
    except (IndexError, ValueError):
        return []
    return list(range(start, start + len(ids)))


def _per_process(members: list[_Entry]) -> int | None:
    """k when the group's nodes are packed k to a process (the last pack may be smaller)."""
    sizes: dict[str, int] = {}
    for m in members:
        if m.mode != "replicas":
            return None
        sizes[m.exe] = sizes.get(m.exe, 0) + 1
    counts = list(sizes.values())
    if not counts or any(c != counts[0] for c in counts[:-1]) or counts[-1] > counts[0]:
        return None
    return counts[0]


def _env(resources: Mapping[str, Any], groups: Mapping[str, str]) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for label, process in resources.items():
        if label not in groups:
            raise ProgramError(
                f"local_resources names {label!r}, which is not a group of the program "
                f"(groups: {', '.join(groups)})"
            )
        env = getattr(process, "env", None) or {}
        out[groups[label]] = {str(k): str(v) for k, v in env.items()}
    return out


@dataclass
class _Made:
    """A Launchpad node as IR pieces."""

    kind: str
    target: str
    factory: Opaque | None
    posargs: tuple[Value, ...]
    args: FrozenMap
    rpc: RpcSettings


def _made(node: LpNode, values: Values, node_id: str) -> _Made:
    who = f"node {node_id} ({node.describe()})"
    fields = node.kind_fields()
    if fields is not None:  # reverb, cacher: the kind makes the arguments, as from YAML
        kind = get_kind(node.kind)
        made = kind.args(kind.options.model_construct(**fields))
        return _Made(
            node.kind,
            kind.builtin_target or "",
            None,
            (),
            FrozenMap({k: values.value(v, f"{who} {k}") for k, v in made.items()}),
            RpcSettings(),
        )
    posargs, kwargs = bind(node.constructor, node.args, node.kwargs, who)
    path = import_path_of(node.constructor)
    factory = None if path else values.value(node.constructor, f"{who} constructor")
    assert factory is None or isinstance(factory, Opaque)
    rpc = RpcSettings()
    if isinstance(node, CourierNode):
        rpc = RpcSettings(
            threads=node.thread_pool_size or rpc.threads, call_timeout_s=node.call_timeout_s
        )
    return _Made(
        node.kind,
        path or "",
        factory,
        tuple(values.value(v, f"{who} argument {i}") for i, v in enumerate(posargs)),
        FrozenMap({k: values.value(v, f"{who} argument {k!r}") for k, v in kwargs.items()}),
        rpc,
    )


def _edges(node_id: str, made: _Made) -> list[Edge]:
    kind = get_kind(made.kind)
    out = []
    for i, v in enumerate(made.posargs):
        for path, ref in iter_refs(v, f"[{i}]"):
            out.append(Edge(node_id, ref.node, path, kind.edge_via(path) or "ref"))
    for path, ref in iter_refs(made.args):
        out.append(Edge(node_id, ref.node, path, kind.edge_via(path) or "ref"))
    return out
