"""Which node of the allocation runs which executable: the ssh backend's placement
(``topo.backends.ssh.placement``: host sets together, ``resources.spread`` one process
per node, labels, then balanced) over the job's nodes, a node's Slurm features being
its labels and its room unlimited (the job holds the node's CPUs for the run as a
whole). In a heterogeneous job, the executables ``planned`` on a node (by
``components``: the node of the component sized for them) stay there. Pure: no Slurm
command, no process.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from topo.backends.device_plan import assign
from topo.backends.devices import Assigned
from topo.backends.slurm.allocation import Allocation
from topo.backends.ssh.inventory import HostSpec, Inventory
from topo.backends.ssh.placement import Placement, place
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Program

__all__ = ["Placement", "as_held", "as_inventory", "job_devices", "place_in"]

# The ssh placement's words for a host's labels, and its hints, in a job's terms.
WORDS = {
    "host labelled": "node with the feature(s)",
    "no host has": "no node of the job has",
    "(no labels": "(no features",
    "each of its processes needs a host": "each of its processes needs a node",
    "every such host": "every such node",
    "on one host, and no host it may use": "on one node, and no node of the job it may use",
}
ITS, HOLDS = "(its accelerators: ", "(the job holds there: "  # a node's GPUs: the job's
# The ssh placement's hints speak of an inventory; in a job, what changes is the request.
HINTS = {
    "inventory": "ask Slurm for nodes that fit (sbatch -N, --constraint=FEATURE), or change "
    "the group's resources (host_labels, spread, count)",
    "gpus": "ask Slurm for the GPUs on each node (sbatch --gres=gpu:N; topo run -b slurm "
    "outside a job asks for them itself), or change resources.accelerators",
}


def as_inventory(allocation: Allocation) -> Inventory:
    """The allocation's nodes as hosts of an inventory (what the placement reads)."""
    hosts = tuple(
        HostSpec(
            name=node.name,
            address=node.address,
            port=0,
            user="",
            key=None,
            known_hosts=Path(),
            python=sys.executable,
            workdir=str(Path.cwd()),
            labels=node.features,
            accelerators={"gpu": len(node.gpus)} if node.gpus else {},
        )
        for node in allocation.nodes
    )
    return Inventory(hosts)


def place_in(
    program: Program, allocation: Allocation, planned: Mapping[str, str] | None = None
) -> Placement:
    """Every executable of ``program`` on a node of ``allocation`` (those ``planned``
    on a node there); a ``TopoError`` (one diagnostic per unit that fits nowhere, with
    what to ask Slurm for)."""
    try:
        return place(program, as_inventory(allocation), running=planned)
    except TopoError as error:
        raise TopoError([_for_slurm(d, allocation.job) for d in error.diagnostics]) from None


def job_devices(
    program: Program,
    placement: Placement,
    allocation: Allocation,
    kept: Mapping[str, Assigned] | None = None,
) -> dict[str, Assigned]:
    """The GPUs each executable that asks gets among those the job holds on its node,
    as 0..n-1: their order in what a step sees there (``CUDA_VISIBLE_DEVICES``, which
    the node's agent reads: a job holding a node's GPUs 1 and 2 sees "1,2"); ``kept``:
    the running executables' (``topo apply``). ``TopoError`` in a job's words."""
    host_of = {e.id: placement.host_of(e.id) for e in program.executables}
    held = {n.name: {"gpu": len(n.gpus)} for n in allocation.nodes if n.gpus}
    try:
        return assign(program, host_of, held, kept)
    except TopoError as error:
        said = [
            replace(d, message=d.message.replace("host ", "node ").replace(ITS, HOLDS))
            for d in error.diagnostics
        ]
        raise TopoError([_for_slurm(d, allocation.job) for d in said]) from None


def as_held(got: Assigned, node: str, allocation: Allocation) -> Assigned:
    """``job_devices``' GPUs of ``node`` by the indexes the node knows them by."""
    held = allocation.node(node).gpus
    return Assigned(got.kind, tuple(held[i] if i < len(held) else i for i in got.ids))


def _for_slurm(found: Diagnostic, job: str) -> Diagnostic:
    """A placement diagnostic in a job's words: nodes, features, the request."""
    message = found.message.replace("(hosts: ", f"(the nodes of job {job}: ")
    for said, meant in WORDS.items():
        message = message.replace(said, meant)
    hint = found.hint
    if hint is not None and "accelerators" in hint:
        hint = HINTS["gpus"]
    elif hint is not None and "inventory" in hint:
        hint = HINTS["inventory"]
    return replace(found, message=message, hint=hint)
