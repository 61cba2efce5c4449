"""An ``lp.Program`` -> the Program IR that a YAML file compiles to, run by any backend.

Groups keep their labels (``program.groups['counter']`` may hold a counter and a steps
limiter: each node then carries its own kind and target). Positional arguments are bound
to parameter names where the constructor's signature allows, so edges are named as in
YAML; handles become references; any other object becomes an opaque value (imported by
name, or cloudpickled once however many nodes share it). Colocations are packed by the
same rules as YAML's (:mod:`topo.ir.packing`): a thread colocation of alike consecutive
replicas as ``group/a-b`` (a group's of equal size as ``per_process``), others as named
thread sets, ``MultiProcessingColocation`` as a host placement. Errors, and what the IR's
graph checks find, are :class:`ProgramError` diagnostics at the ``add_node`` call that
added the node at fault.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from topo.diagnostics import Diagnostic, SourcePos
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
from topo.ir.checks import Problem, check_graph
from topo.ir.packing import (
    Colocation,
    consecutive_replicas,
    group_of,
    pack,
    replicas_id,
    set_name,
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

__all__ = ["Compiled", "ProgramError", "Sites", "bind", "compile_program", "group_name"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_\-]*$")


@dataclass
class Sites:
    """Where the user's code added each part of a Launchpad program: what a YAML source
    map is to a YAML program."""

    nodes: dict[str, SourcePos | None] = field(default_factory=dict)  # IR node id -> add_node
    colocations: list[SourcePos | None] = field(default_factory=list)  # request -> add_node

    def diagnostic(self, problem: Problem, executables: Sequence[Executable]) -> Diagnostic:
        """A graph problem at the add_node call of what it is about: the node, the
        colocation, the executable's first node, or the group's first node."""
        site = None
        if problem.node:
            site = self.nodes.get(problem.node)
        elif problem.colocation is not None:
            site = self.colocations[problem.colocation]
        elif problem.executable:
            exe = next((e for e in executables if e.id == problem.executable), None)
            site = self.nodes.get(exe.nodes[0]) if exe is not None else None
        elif problem.group:
            site = next((s for n, s in self.nodes.items() if group_of(n) == problem.group), None)
        return Diagnostic(problem.message, site, problem.hint)


@dataclass
class Compiled:
    """The IR of a Launchpad program, where each Launchpad node went, and where it came from."""

    program: Program
    node_ids: dict[int, str]  # Launchpad node uid -> IR node id
    nodes: dict[str, LpNode] = field(default_factory=dict)  # IR node id -> Launchpad node
    sites: Sites = field(default_factory=Sites)


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
    site: SourcePos | None  # the add_node call that added it (or its colocation)


@dataclass
class _Placed:
    """A colocation given to add_node: its nodes, and where it was added."""

    item: MultiThreadingColocation
    members: list[_Entry]
    site: SourcePos | None


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
    placed: list[_Placed] = []
    groups: dict[str, str] = {}  # label -> group name
    taken: set[str] = set()
    for label, added in program.groups.items():
        if not added:
            continue
        name = group_name(label, taken)
        taken.add(name)
        groups[label] = name
        for item in added:
            found = _entries(item, name, program.added_at(item))
            if isinstance(item, MultiThreadingColocation):
                placed.append(_Placed(item, found, program.added_at(item)))
            entries.extend(found)
    if not entries:
        raise ProgramError(f"program {program.name!r} has no nodes")
    seen: dict[int, _Entry] = {}
    for e in entries:
        if e.node.uid in seen:
            raise ProgramError(f"{e.node.describe()} is in the program twice", e.site)
        seen[e.node.uid] = e
    node_ids = _ids(entries)
    by_group: dict[str, list[_Entry]] = {}
    for e in entries:
        by_group.setdefault(e.group, []).append(e)
    packing = pack(
        {g: [node_ids[e.node.uid] for e in members] for g, members in by_group.items()},
        _colocations(placed, node_ids),
    )
    exe_mode = {e.id: e.mode for e in packing.executables}
    values = Values(node_ids, live)
    seeds = derive_seeds(seed, [node_ids[e.node.uid] for e in entries])
    ir_groups: list[Group] = []
    nodes: list[Node] = []
    edges: list[Edge] = []
    labels = {v: k for k, v in groups.items()}
    env = _env(resources or {}, groups)
    for name, members in by_group.items():
        exes = [packing.node_exe[node_ids[m.node.uid]] for m in members]
        first = _made(members[0], values, node_ids[members[0].node.uid])
        group = Group(
            name=name,
            kind=first.kind,
            target=first.target,
            count=len(members),
            singleton=len(members) == 1,
            per_process=_per_process([exe_mode[x] for x in exes], exes),
            resources=Resources(env=FrozenMap(env.get(name, {}))),
            rpc=first.rpc,
            label=labels[name] if labels[name] != name else "",
            draw=get_kind(first.kind).draw,
        )
        ir_groups.append(group)
        for replica, e in enumerate(members):
            node_id = node_ids[e.node.uid]
            made = first if replica == 0 else _made(e, values, node_id)
            nodes.append(
                Node(
                    id=node_id,
                    group=name,
                    replica=replica,
                    args=made.args,
                    seed=seeds[node_id],
                    executable=packing.node_exe[node_id],
                    posargs=made.posargs,
                    kind="" if made.kind == group.kind else made.kind,
                    target="" if made.target == group.target or made.factory else made.target,
                    factory=made.factory,
                    disable_run=not e.node.should_run,
                    rpc=None if made.rpc == group.rpc else made.rpc,
                )
            )
            edges.extend(_edges(node_id, made))
    sites = Sites({node_ids[e.node.uid]: e.site for e in entries}, [p.site for p in placed])
    problems = packing.problems + check_graph(ir_groups, packing.executables)
    if problems:
        raise ProgramError([sites.diagnostic(p, packing.executables) for p in problems])
    ir = Program(
        name=program.name if _NAME.match(program.name) else group_name(program.name, set()),
        seed=seed,
        params=FrozenMap(),
        groups=tuple(ir_groups),
        nodes=tuple(nodes),
        edges=tuple(edges),
        executables=tuple(packing.executables),
    )
    lp_nodes = {node_ids[e.node.uid]: e.node for e in entries}
    return Compiled(ir, node_ids, lp_nodes, sites)


def _entries(item: LpNode, group: str, site: SourcePos | None) -> list[_Entry]:
    if not isinstance(item, LpNode):
        raise ProgramError(
            f"group {group!r} holds {item!r}, which is not a Launchpad node: topo launches "
            "lp.PyNode, lp.PyClassNode, lp.CourierNode, lp.ReverbNode, lp.CacherNode and "
            "the colocations",
            site,
        )
    if type(item) is MultiThreadingColocation and not item.nodes:
        raise ProgramError(f"a MultiThreadingColocation in group {group!r} holds no node", site)
    return [_Entry(n, group, site) for n in item.inner_nodes()]


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


def _colocations(placed: list[_Placed], node_ids: dict[int, str]) -> list[Colocation]:
    """The colocation requests of the program's colocations, in the order they were added:
    a ``MultiProcessingColocation`` a host set; a thread colocation of one node, or of alike
    consecutive replicas, packed replicas (``group/a-b``); any other a thread set named
    after its group (``group_2``, ... for the next ones)."""
    taken = set(node_ids.values())
    out = []
    for p in placed:
        ids = tuple(node_ids[m.node.uid] for m in p.members)
        if isinstance(p.item, MultiProcessingColocation):
            out.append(Colocation(ids, "host", f"host-{p.item.uid}"))
            continue
        alike = len({_builder(m.node) for m in p.members}) == 1
        if alike and consecutive_replicas(ids):
            request = Colocation(ids, "replicas", replicas_id(ids))
        else:
            request = Colocation(ids, "threads", group_name(set_name(ids), taken))
        taken.add(request.name)
        out.append(request)
    return out


def _builder(node: LpNode) -> tuple[str, int]:
    """What makes nodes alike enough to be replicas packed together: kind and constructor."""
    return type(node).__name__, id(node.constructor)


def _per_process(modes: list[str], exes: list[str]) -> int | None:
    """k when the group's nodes (their executables' ``modes`` and ids, in replica order) are
    packed k to a process (the last pack may be smaller)."""
    if any(mode != "replicas" for mode in modes):
        return None
    sizes: dict[str, int] = {}
    for exe in exes:
        sizes[exe] = sizes.get(exe, 0) + 1
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


def _made(entry: _Entry, values: Values, node_id: str) -> _Made:
    """The IR pieces of one node; an error in its arguments is placed at its add_node call."""
    try:
        return _pieces(entry.node, values, node_id)
    except ProgramError as exc:
        raise exc.at(entry.site) from None


def _pieces(node: LpNode, values: Values, node_id: str) -> _Made:
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
