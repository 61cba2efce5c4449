"""Whether a changed program (``topo apply``) still fits the CPUs the job holds. A job
keeps its size for its whole life: what a change adds runs on the nodes it has, beside
what runs there. Executables that name their CPUs (``resources.cpus``) must fit the
CPUs the job holds on their node together; those that name none share the node's as
they did from the start (the request counted one each). Pure: no Slurm command.
"""

from __future__ import annotations

from collections.abc import Collection

from topo.backends.slurm.allocation import Allocation
from topo.backends.ssh.placement import Placement
from topo.diagnostics import Diagnostic
from topo.ir import Program


def named_cpus(program: Program, exe_id: str) -> int:
    """The CPUs executable ``exe_id`` names (the most any group of its nodes names; 0:
    none)."""
    return max(
        (
            len(program.group_of(n).resources.cpus or ())
            for n in program.executable_index[exe_id].nodes
        ),
        default=0,
    )


def cpu_problems(
    program: Program, placement: Placement, allocation: Allocation, new: Collection[str]
) -> list[Diagnostic]:
    """One error per node where the ``new`` executables (placed by ``placement``) would
    take the named CPUs past what job holds there, naming the group that asks."""
    out = []
    for node in allocation.nodes:
        held = node.cpus
        there = placement.executables_on(node.name)
        added = [e for e in there if e in new and named_cpus(program, e)]
        if held is None or not added:
            continue
        asked = sum(named_cpus(program, e) for e in there)
        if asked <= held:
            continue
        group = program.group_of(program.executable_index[added[0]].nodes[0])
        out.append(
            Diagnostic(
                f"group '{group.name}' asks {named_cpus(program, added[0])} CPU(s) per process: "
                f"on node {node.name} the executables would name {asked} CPUs, and Slurm "
                f"job {allocation.job} holds {held} there",
                group.origin,
                "a change runs in the job as it is: lower resources.cpus or count, or start "
                "the program in a bigger job (topo plan -b slurm sizes it)",
            )
        )
    return out
