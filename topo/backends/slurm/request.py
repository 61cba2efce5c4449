"""The job a program asks Slurm for, sized from its plan, and what the partition
refuses of it (``limits``: Slurm's limit and the group's ``file:line:col``).

Executables are packed onto planned nodes (``demand``: what each asks): a
host-colocation set on one node, each process of a ``resources.spread`` group on a node
of its own, the rest where they fit on a node of the partition, balanced over as few
nodes as hold them all. A planned node is one Slurm task (topo's agent) whose CPUs, GPUs
and memory are its executables' sum. Nodes that ask alike form one component
(``--nodes=N --cpus-per-task=C``, the most any of them asks); nodes that differ in GPUs
or node features (``resources.host_labels``) form components of a heterogeneous job
(``#SBATCH hetjob``). Pure: no Slurm command.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from topo.backends.slurm.demand import Component, Demand, Unit, fits, units
from topo.backends.slurm.limits import count_problems, time_problems, too_big
from topo.backends.slurm.options import SlurmOptions
from topo.backends.slurm.partition import Partition
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Program

__all__ = ["Component", "Demand", "PlannedNode", "Request", "plan_request"]


@dataclass
class PlannedNode:
    """One node the job asks for: the executables topo will run there."""

    exes: list[str] = field(default_factory=list)
    demand: Demand = field(default_factory=Demand)
    spread: set[str] = field(default_factory=set)
    component: int = 0

    def take(self, unit: Unit) -> None:
        self.exes.extend(unit.exes)
        self.demand = self.demand.plus(unit.demand)
        if unit.spread is not None:
            self.spread.add(unit.spread)


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


# -- packing ------------------------------------------------------------------------------


def _pack(units: Sequence[Unit], part: Partition, opened: int) -> list[PlannedNode]:
    """``units`` on planned nodes (``opened`` of them to begin with): spread and host-set
    units first-fit, the rest on the least-loaded node that holds them; a node more when
    none does. Every unit fits some node of ``part`` (checked before)."""
    nodes = [PlannedNode() for _ in range(opened)]

    def fitting(unit: Unit) -> list[PlannedNode]:
        return [
            n
            for n in nodes
            if (unit.spread is None or unit.spread not in n.spread)
            and fits(part, n.demand.plus(unit.demand))
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


def _ranked(units: Sequence[Unit]) -> list[Unit]:
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
        if not fits(part, _most([nodes[i] for i in members])):
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
    errors = time_problems(part, options)
    gathered = units(program)
    errors += [too_big(program, u, part) for u in gathered if not fits(part, u.demand)]
    if errors:
        raise TopoError(errors)
    ranked = _ranked(gathered)
    first = _pack(ranked, part, 0)
    balanced = _pack(ranked, part, len(first))
    packings = [balanced, first] if len(balanced) <= len(first) else [first]
    refused: list[Diagnostic] = []
    # alike nodes asked for alike where the partition has room for that, else as they are
    for exact in (False, True):
        for nodes in packings:
            components, which = _components(nodes, part, exact)
            errors = count_problems(program, gathered, components, part)
            if not errors:
                for node, comp in zip(nodes, which, strict=True):
                    node.component = comp
                ordered = sorted(nodes, key=lambda n: n.component)  # stable
                return Request(part, options, tuple(components), tuple(ordered))
            refused = refused or errors
    raise TopoError(refused)
