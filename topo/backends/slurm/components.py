"""Which node of a heterogeneous job runs which executable: the one of the component
the request sized for it. topo asks Slurm for a component per kind of node
(``request.plan_request``: GPUs, features, CPUs); inside the job the same plan is made
again from the same program and partition, and its planned nodes are matched, component
by component and in order, with the job's nodes. A job whose shape is not that plan's
(written by hand, or the partition changed) gets no such assignment: the executables are
then placed over all its nodes, by their features, as in any job.
"""

from __future__ import annotations

from topo.backends.slurm.allocation import Allocation, NoAllocation
from topo.backends.slurm.request import Request
from topo.diagnostics import TopoError
from topo.ir import Program


def by_component(request: Request, allocation: Allocation) -> dict[str, str] | None:
    """Executable -> node of ``allocation``, each on a node of the component ``request``
    planned it on; None when the job's components are not the request's (pure)."""
    if len(request.components) != 1 + max(n.component for n in allocation.nodes):
        return None
    assigned: dict[str, str] = {}
    for c, comp in enumerate(request.components):
        planned = [n for n in request.nodes if n.component == c]
        held = [n for n in allocation.nodes if n.component == c]
        if len(planned) != comp.nodes or len(held) != comp.nodes:
            return None
        for plan, node in zip(planned, held, strict=True):
            for exe in plan.exes:
                assigned[exe] = node.name
    return assigned


def planned_nodes(program: Program, allocation: Allocation) -> dict[str, str] | None:
    """For a heterogeneous ``allocation``: executable -> node as its request planned
    (the job's partition read with ``scontrol``); None for any other job, or when the
    plan cannot be made again here."""
    if not allocation.heterogeneous:
        return None
    from topo.backends.slurm.options import SlurmOptions
    from topo.backends.slurm.plan import request_for

    try:
        request = request_for(program, SlurmOptions(partition=allocation.partition))
    except (TopoError, NoAllocation):
        return None
    return by_component(request, allocation)
