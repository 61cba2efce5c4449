"""The job a program asks Slurm for, sized from its plan, and what the partition
refuses of it (``TopoError`` with Slurm's limit and the group's ``file:line:col``).

Each executable (one process) asks for the CPUs of ``resources.cpus`` (their count;
one when not given: Slurm's unit is a core), the GPUs of ``resources.gpus`` and the
memory of ``resources.memory``, the most any of its nodes' groups asks. Executables are
packed onto planned nodes: a host-colocation set on one node, each process of a
``resources.spread`` group on a node of its own, the rest where they fit on a node of
the partition, balanced over as few nodes as hold them all. A planned node is one Slurm
task (topo's agent) whose CPUs, GPUs and memory are its executables' sum. Nodes that ask
alike form one component (``--nodes=N --cpus-per-task=C``, the most any of them asks);
nodes that differ in GPUs or node features (``resources.host_labels``) form components
of a heterogeneous job (``#SBATCH hetjob``). Pure: no Slurm command.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from topo.backends.slurm.options import SlurmOptions
from topo.backends.slurm.partition import Node, Partition, show_time, time_s
from topo.diagnostics import Diagnostic, SourcePos, TopoError
from topo.ir import Program

DEFAULT_CPUS = 1  # an executable that gives no resources.cpus asks for one core
MIB = 1024 * 1024


@dataclass(frozen=True)
class Demand:
    """What a process, or a node's processes together, ask of one Slurm node."""

    cpus: int = 0
    gpus: int = 0
    memory_mib: int = 0  # 0: none asked (Slurm's default memory)
    labels: frozenset[str] = frozenset()

    def plus(self, other: Demand) -> Demand:
        """The two together on one node."""
        return Demand(
            self.cpus + other.cpus,
            self.gpus + other.gpus,
            self.memory_mib + other.memory_mib,
            self.labels | other.labels,
        )


def demand(program: Program, exe_id: str) -> Demand:
    """What executable ``exe_id`` asks for: the most any group of its nodes asks."""
    cpus, gpus, memory = 0, 0, 0
    labels: set[str] = set()
    for node in program.executable_index[exe_id].nodes:
        res = program.group_of(node).resources
        cpus = max(cpus, len(res.cpus) if res.cpus else DEFAULT_CPUS)
        gpus = max(gpus, len(res.gpus) if res.gpus else 0)
        memory = max(memory, math.ceil(res.memory / MIB) if res.memory else 0)
        labels.update(res.host_labels)
    return Demand(cpus, gpus, memory, frozenset(labels))


@dataclass(frozen=True)
class _Unit:
    """Executables that go to one node together."""

    exes: tuple[str, ...]
    groups: tuple[str, ...]
    demand: Demand
    spread: str | None = None  # the spread group whose process this is
    host_set: str | None = None


def _units(program: Program) -> list[_Unit]:
    """The program's executables gathered by host-colocation set, in program order."""
    members: dict[str, list[str]] = {}
    order: list[str] = []
    for exe in program.executables:
        key = f"set:{exe.placement}" if exe.placement is not None else f"exe:{exe.id}"
        if key not in members:
            order.append(key)
        members.setdefault(key, []).append(exe.id)
    units = []
    for key in order:
        exes = tuple(members[key])
        groups = tuple(
            dict.fromkeys(
                program.node(n).group for e in exes for n in program.executable_index[e].nodes
            )
        )
        total = Demand()
        for exe_id in exes:
            total = total.plus(demand(program, exe_id))
        spread = next((g for g in groups if program.group_index[g].resources.spread), None)
        host_set = key[4:] if key.startswith("set:") else None
        units.append(_Unit(exes, groups, total, spread, host_set))
    return units


@dataclass
class PlannedNode:
    """One node the job asks for: the executables topo will run there."""

    exes: list[str] = field(default_factory=list)
    demand: Demand = field(default_factory=Demand)
    spread: set[str] = field(default_factory=set)
    component: int = 0

    def take(self, unit: _Unit) -> None:
        self.exes.extend(unit.exes)
        self.demand = self.demand.plus(unit.demand)
        if unit.spread is not None:
            self.spread.add(unit.spread)


@dataclass(frozen=True)
class Component:
    """Nodes asked for alike: one ``sbatch`` resource request (a heterogeneous job has
    several). ``memory_mib`` 0: no ``--mem``."""

    nodes: int
    cpus: int
    gpus: int
    memory_mib: int
    labels: tuple[str, ...]

    @property
    def demand(self) -> Demand:
        return Demand(self.cpus, self.gpus, self.memory_mib, frozenset(self.labels))


@dataclass(frozen=True)
class Request:
    """The job: its components and the planned nodes (in component order)."""

    partition: Partition
    options: SlurmOptions
    components: tuple[Component, ...]
    nodes: tuple[PlannedNode, ...]

    @property
    def heterogeneous(self) -> bool:
        return len(self.components) > 1


# -- what a node of the partition holds ------------------------------------------------


def _room(node: Node, part: Partition) -> Demand:
    """What one node of ``part`` offers a job (its own size under the partition's caps)."""
    cpus = node.cpus if part.max_cpus_per_node is None else min(node.cpus, part.max_cpus_per_node)
    memory = node.memory_mib
    if part.max_mem_per_node_mib is not None:
        memory = min(memory, part.max_mem_per_node_mib)
    return Demand(cpus, node.gpus, memory, frozenset(node.features))


def _holds(room: Demand, want: Demand) -> bool:
    return (
        want.cpus <= room.cpus
        and want.gpus <= room.gpus
        and want.memory_mib <= room.memory_mib
        and want.labels <= room.labels
    )


def _fits(part: Partition, want: Demand) -> bool:
    return any(_holds(_room(n, part), want) for n in part.nodes)


# -- packing ------------------------------------------------------------------------------


def _pack(units: Sequence[_Unit], part: Partition, opened: int) -> list[PlannedNode]:
    """``units`` on planned nodes (``opened`` of them to begin with): spread and host-set
    units first-fit, the rest on the least-loaded node that holds them; a node more when
    none does. Every unit fits some node of ``part`` (checked before)."""
    nodes = [PlannedNode() for _ in range(opened)]

    def fitting(unit: _Unit) -> list[PlannedNode]:
        return [
            n
            for n in nodes
            if (unit.spread is None or unit.spread not in n.spread)
            and _fits(part, n.demand.plus(unit.demand))
        ]

    constrained = [u for u in units if u.spread is not None or u.host_set is not None]
    free = [u for u in units if u.spread is None and u.host_set is None]
    for unit in [*constrained, *free]:
        candidates = fitting(unit)
        if not candidates:
            nodes.append(PlannedNode())
            candidates = nodes[-1:]
        if unit.spread is not None or unit.host_set is not None:
            chosen = candidates[0]
        else:  # min keeps node order among equals
            chosen = min(candidates, key=lambda n: (n.demand.cpus, n.demand.memory_mib))
        chosen.take(unit)
    return [n for n in nodes if n.exes]


def _ranked(units: Sequence[_Unit]) -> list[_Unit]:
    """Biggest first (GPUs, features, CPUs, memory), program order among equals."""
    return sorted(
        units,
        key=lambda u: (-u.demand.gpus, -len(u.demand.labels), -u.demand.cpus, -u.demand.memory_mib),
    )


def _components(
    nodes: Sequence[PlannedNode], part: Partition, exact: bool
) -> tuple[list[Component], list[int]]:
    """Planned nodes asked for alike, and each node's component: by GPUs and features,
    each component asking the most any of its nodes asks (``exact``, or where no node
    would hold that most: by exact demand)."""
    keyed: dict[object, list[int]] = {}
    for i, node in enumerate(nodes):
        key = (node.demand.gpus, tuple(sorted(node.demand.labels)))
        keyed.setdefault(node.demand if exact else key, []).append(i)
    out: list[Component] = []
    which = [0] * len(nodes)
    for members in keyed.values():
        parts = [members]
        if not _fits(part, _most([nodes[i] for i in members])):
            parts = list(_by_exact(nodes, members).values())
        for same in parts:
            for i in same:
                which[i] = len(out)
            top = _most([nodes[i] for i in same])
            out.append(
                Component(len(same), top.cpus, top.gpus, top.memory_mib, tuple(sorted(top.labels)))
            )
    return out, which


def _most(nodes: Sequence[PlannedNode]) -> Demand:
    """The most any of ``nodes`` asks, per resource (they share GPUs and features)."""
    return Demand(
        max(n.demand.cpus for n in nodes),
        nodes[0].demand.gpus,
        max(n.demand.memory_mib for n in nodes),
        nodes[0].demand.labels,
    )


def _by_exact(nodes: Sequence[PlannedNode], members: Iterable[int]) -> dict[Demand, list[int]]:
    keyed: dict[Demand, list[int]] = {}
    for i in members:
        keyed.setdefault(nodes[i].demand, []).append(i)
    return keyed


# -- the request and its refusals ---------------------------------------------------------


def plan_request(program: Program, part: Partition, options: SlurmOptions) -> Request:
    """The job for ``program`` on partition ``part``; a ``TopoError`` with every limit of
    the partition it passes (one diagnostic each)."""
    options = options.checked()
    errors = _time_problems(part, options)
    units = _units(program)
    errors += [_too_big(program, u, part) for u in units if not _fits(part, u.demand)]
    if errors:
        raise TopoError(errors)
    ranked = _ranked(units)
    first = _pack(ranked, part, 0)
    balanced = _pack(ranked, part, len(first))
    packings = [balanced, first] if len(balanced) <= len(first) else [first]
    refused: list[Diagnostic] = []
    # alike nodes asked for alike where the partition has room for that, else as they are
    for exact in (False, True):
        for nodes in packings:
            components, which = _components(nodes, part, exact)
            errors = _count_problems(program, units, components, part)
            if not errors:
                for node, comp in zip(nodes, which, strict=True):
                    node.component = comp
                ordered = sorted(nodes, key=lambda n: n.component)  # stable
                return Request(part, options, tuple(components), tuple(ordered))
            refused = refused or errors
    raise TopoError(refused)


def _origin(program: Program, groups: Sequence[str], wanted: str = "") -> SourcePos | None:
    """The position of the first of ``groups`` that sets ``resources.<wanted>``."""
    for name in groups:
        group = program.group_index[name]
        if not wanted or getattr(group.resources, wanted):
            return group.origin
    return program.group_index[groups[0]].origin if groups else None


def _who(unit: _Unit) -> str:
    """The unit as a sentence's subject: group 'a', host set 'core' (groups 'a', 'b')."""
    groups = ("groups " if len(unit.groups) > 1 else "group ") + ", ".join(
        f"'{g}'" for g in unit.groups
    )
    if unit.host_set is not None and len(unit.exes) > 1:
        return f"host set '{unit.host_set}' ({groups})"
    if len(unit.groups) > 1:
        return f"executable '{unit.exes[0]}' ({groups})"
    return f"a process of {groups}"


def _too_big(program: Program, unit: _Unit, part: Partition) -> Diagnostic:
    """Why no node of ``part`` holds ``unit``: each of its asks over the partition's most."""
    want = unit.demand
    rooms = [(n, _room(n, part)) for n in part.nodes]
    where = f"partition '{part.name}'"
    if not rooms:
        return Diagnostic(
            f"{where} has no nodes",
            _origin(program, unit.groups),
            "sinfo shows the partitions and their nodes",
        )
    said: list[str] = []
    wanted = ""
    top_cpus = max(rooms, key=lambda r: r[1].cpus)
    if want.cpus > top_cpus[1].cpus:
        cap = part.max_cpus_per_node
        limit = (
            f"MaxCPUsPerNode={cap}"
            if cap is not None and cap < top_cpus[0].cpus
            else f"the most: {top_cpus[0].cpus} on {top_cpus[0].name}"
        )
        said.append(
            f"{want.cpus} CPUs on one node, and {where} gives at most {top_cpus[1].cpus} ({limit})"
        )
        wanted = wanted or "cpus"
    top_gpus = max(rooms, key=lambda r: r[1].gpus)
    if want.gpus > top_gpus[1].gpus:
        have = (
            f"at most {top_gpus[1].gpus} on a node "
            f"({top_gpus[0].name}: Gres=gpu:{top_gpus[0].gpus})"
            if top_gpus[1].gpus
            else "no node with GPUs (no Gres=gpu)"
        )
        said.append(f"{want.gpus} GPUs on one node, and {where} has {have}")
        wanted = wanted or "gpus"
    top_mem = max(rooms, key=lambda r: r[1].memory_mib)
    if want.memory_mib > top_mem[1].memory_mib:
        cap_mem = part.max_mem_per_node_mib
        limit = (
            f"MaxMemPerNode={cap_mem}M"
            if cap_mem is not None and cap_mem < top_mem[0].memory_mib
            else f"the most: RealMemory={top_mem[0].memory_mib}M on {top_mem[0].name}"
        )
        said.append(
            f"{want.memory_mib} MiB of memory on one node, and {where} gives at most "
            f"{top_mem[1].memory_mib} MiB ({limit})"
        )
        wanted = wanted or "memory"
    missing = want.labels - set().union(*(r.labels for _, r in rooms))
    if missing:
        said.append(
            f"a node with the feature(s) {', '.join(sorted(missing))}, and no node of {where} "
            "has them"
        )
        wanted = wanted or "host_labels"
    if not said:  # each ask fits some node, but no one node holds them all
        said.append(
            f"{want.cpus} CPUs, {want.gpus} GPUs, {want.memory_mib} MiB and features "
            f"{', '.join(sorted(want.labels)) or 'none'} on one node, and no node of {where} "
            "has them all"
        )
    return Diagnostic(
        f"{_who(unit)} needs " + "; and ".join(said),
        _origin(program, unit.groups, wanted),
        "ask for less (resources of the group), or submit to another partition (--partition)",
    )


def _count_problems(
    program: Program, units: Sequence[_Unit], components: Sequence[Component], part: Partition
) -> list[Diagnostic]:
    """The job's node count over the partition's (MaxNodes, its nodes), per component
    and in all."""
    total = sum(c.nodes for c in components)
    widest = max(
        (u for u in units if u.spread is not None),
        key=lambda u: sum(1 for v in units if v.spread == u.spread),
        default=None,
    )
    pos = None
    if widest is not None:
        pos = _origin(program, widest.groups, "spread")
    elif units:  # the group with the most processes
        sizes = Counter(g for u in units for g in u.groups)
        pos = program.group_index[max(sizes, key=lambda g: sizes[g])].origin
    why = (
        f"group '{widest.spread}' sets resources.spread"
        if widest is not None
        else "to hold its processes' CPUs, GPUs and memory"
    )
    where = f"partition '{part.name}'"
    errors = []
    if widest is None:  # processes over the partition's CPUs say more than a node count
        errors = _cpu_problems(units, part, pos)
        if errors:
            return errors
    if part.max_nodes is not None and total > part.max_nodes:
        errors.append(
            Diagnostic(
                f"the job needs {total} nodes ({why}), and {where} allows at most "
                f"{part.max_nodes} (MaxNodes={part.max_nodes})",
                pos,
                "colocate more (colocate.per_process, resources), or submit to another "
                "partition (--partition)",
            )
        )
        return errors
    if total > len(part.nodes):
        errors.append(
            Diagnostic(
                f"the job needs {total} nodes ({why}), and {where} has {len(part.nodes)} "
                f"({', '.join(n.name for n in part.nodes) or 'none'})",
                pos,
                "colocate more (colocate.per_process, resources), or submit to another "
                "partition (--partition)",
            )
        )
        return errors
    errors = _cpu_problems(units, part, pos)
    if errors:
        return errors
    # components never share a node: the biggest asks take the smallest nodes that hold them
    taken: set[str] = set()
    ranked = sorted(components, key=lambda c: (-c.gpus, -len(c.labels), -c.cpus, -c.memory_mib))
    for comp in ranked:
        holding = [n for n in part.nodes if _holds(_room(n, part), comp.demand)]
        free = sorted(
            (n for n in holding if n.name not in taken),
            key=lambda n: (n.gpus, n.cpus, n.memory_mib),
        )
        if len(free) < comp.nodes:
            others = (
                f", {len(holding) - len(free)} of them for the job's other nodes"
                if taken and len(holding) > len(free)
                else ""
            )
            errors.append(
                Diagnostic(
                    f"the job needs {comp.nodes} node{'s' if comp.nodes != 1 else ''} with "
                    f"{_shape(comp)} each, and {where} has {len(holding)} "
                    f"({', '.join(n.name for n in holding) or 'none'}{others})",
                    pos,
                    "ask for less (resources of the groups), or submit to another partition "
                    "(--partition)",
                )
            )
            break
        taken.update(n.name for n in free[: comp.nodes])
    return errors


def _cpu_problems(
    units: Sequence[_Unit], part: Partition, pos: SourcePos | None
) -> list[Diagnostic]:
    """The job's CPUs in all over the partition's."""
    cpus = sum(u.demand.cpus for u in units)
    where = f"partition '{part.name}'"
    room = sum(_room(n, part).cpus for n in part.nodes)
    if cpus > room:
        each = ", ".join(f"{n.name}: {_room(n, part).cpus}" for n in part.nodes)
        return [
            Diagnostic(
                f"the job's {sum(len(u.exes) for u in units)} processes ask for {cpus} CPUs in "
                f"all (one each without resources.cpus), and {where} has {room} ({each})",
                pos,
                "colocate more (colocate.per_process: threads of one process), or submit to "
                "another partition (--partition)",
            )
        ]
    return []


def _shape(comp: Component) -> str:
    """A component's ask in words: 4 CPUs, 1 GPU, 2048 MiB, features a, b."""
    said = [f"{comp.cpus} CPU{'s' if comp.cpus != 1 else ''}"]
    if comp.gpus:
        said.append(f"{comp.gpus} GPU{'s' if comp.gpus != 1 else ''}")
    if comp.memory_mib:
        said.append(f"{comp.memory_mib} MiB")
    if comp.labels:
        said.append(f"features {', '.join(comp.labels)}")
    return ", ".join(said)


def _time_problems(part: Partition, options: SlurmOptions) -> list[Diagnostic]:
    """``--time`` unreadable or over the partition's MaxTime; the warning not before the
    end."""
    limit: int | None = part.max_time_s
    source = f"partition '{part.name}''s MaxTime"
    if options.time is not None:
        source = f"--time {options.time}"
        try:
            limit = time_s(options.time)
        except ValueError:
            return [
                Diagnostic(
                    f"--time {options.time}: not a Slurm time limit",
                    None,
                    "MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS, "
                    "DAYS-HOURS:MINUTES or DAYS-HOURS:MINUTES:SECONDS",
                )
            ]
        if part.max_time_s is not None and (limit is None or limit > part.max_time_s):
            return [
                Diagnostic(
                    f"--time {options.time} ({show_time(limit)}) is over partition "
                    f"'{part.name}''s MaxTime={show_time(part.max_time_s)}",
                    None,
                    "ask for less time, or submit to another partition (--partition)",
                )
            ]
    if limit is not None and options.warning_s >= limit:
        return [
            Diagnostic(
                f"--warning-s {options.warning_s}: the warning must come before the job's "
                f"end, and its time limit is {show_time(limit)} ({source})",
                None,
                "give a shorter --warning-s, or a longer --time",
            )
        ]
    return []
