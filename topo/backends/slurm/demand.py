"""What a program's processes ask of a Slurm node, and what a node of a partition
holds. Each executable (one process) asks for the CPUs of ``resources.cpus`` (their
count; one when not given: Slurm's unit is a core), the GPUs of ``resources.gpus``, the
memory of ``resources.memory`` and the features of ``resources.host_labels``, the most
any of its nodes' groups asks; a host-colocation set is one unit, asking their sum. A
node of a partition holds its CPUs, memory and GPUs under the partition's
``MaxCPUsPerNode`` and ``MaxMemPerNode``. Pure: no Slurm command.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from topo.backends.devices import asked
from topo.backends.slurm.partition import Node, Partition
from topo.diagnostics import Diagnostic
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
    """What executable ``exe_id`` asks for: the most any group of its nodes asks (GPUs:
    its ``resources.accelerators`` of kind gpu, or the ``resources.gpus`` it names)."""
    cpus, gpus, memory = 0, 0, 0
    labels: set[str] = set()
    for node in program.executable_index[exe_id].nodes:
        res = program.group_of(node).resources
        cpus = max(cpus, len(res.cpus) if res.cpus else DEFAULT_CPUS)
        want = asked([res])
        gpus = max(gpus, want.count if want is not None and want.kind == "gpu" else 0)
        memory = max(memory, math.ceil(res.memory / MIB) if res.memory else 0)
        labels.update(res.host_labels)
    return Demand(cpus, gpus, memory, frozenset(labels))


@dataclass(frozen=True)
class Unit:
    """Executables that go to one node together."""

    exes: tuple[str, ...]
    groups: tuple[str, ...]
    demand: Demand
    spread: str | None = None  # the spread group whose process this is
    host_set: str | None = None


def units(program: Program) -> list[Unit]:
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
        units.append(Unit(exes, groups, total, spread, host_set))
    return units


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


def room(node: Node, part: Partition) -> Demand:
    """What one node of ``part`` offers a job (its own size under the partition's caps)."""
    cpus = node.cpus if part.max_cpus_per_node is None else min(node.cpus, part.max_cpus_per_node)
    memory = node.memory_mib
    if part.max_mem_per_node_mib is not None:
        memory = min(memory, part.max_mem_per_node_mib)
    return Demand(cpus, node.gpus, memory, frozenset(node.features))


def holds(room: Demand, want: Demand) -> bool:
    return (
        want.cpus <= room.cpus
        and want.gpus <= room.gpus
        and want.memory_mib <= room.memory_mib
        and want.labels <= room.labels
    )


def fits(part: Partition, want: Demand) -> bool:
    return any(holds(room(n, part), want) for n in part.nodes)


def tpu_refusals(program: Program) -> list[Diagnostic]:
    """One error per group that asks for TPUs: the job asks Slurm for GPUs only
    (``--gres=gpu:N``); Slurm has no generic resource for TPUs that sites share."""
    out = []
    for group in program.groups:
        want = asked([group.resources])
        if group.enabled and want is not None and want.kind == "tpu":
            out.append(
                Diagnostic(
                    f"group '{group.name}' asks for TPUs, and a Slurm job asks for GPUs only "
                    "(--gres=gpu:N)",
                    group.origin,
                    "run it where the TPUs are (procs on a TPU host, ssh with the host's "
                    "accelerators in the inventory, ray with TPU resources)",
                )
            )
    return out
