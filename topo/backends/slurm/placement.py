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

from topo.backends.slurm.allocation import Allocation
from topo.backends.ssh.inventory import HostSpec, Inventory
from topo.backends.ssh.placement import Placement, place
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Program

__all__ = ["Placement", "as_inventory", "place_in"]

# The ssh placement's words for a host's labels, and its hints, in a job's terms.
WORDS = {
    "host labelled": "node with the feature(s)",
    "no host has": "no node of the job has",
    "(no labels": "(no features",
    "each of its processes needs a host": "each of its processes needs a node",
    "every such host": "every such node",
}
# The ssh placement's hints speak of an inventory; in a job, what changes is the request.
HINTS = {
    "inventory": "ask Slurm for nodes that fit (sbatch -N, --constraint=FEATURE), or change "
    "the group's resources (host_labels, spread, count)",
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


def _for_slurm(found: Diagnostic, job: str) -> Diagnostic:
    """A placement diagnostic in a job's words: nodes, features, the request."""
    message = found.message.replace("(hosts: ", f"(the nodes of job {job}: ")
    for said, meant in WORDS.items():
        message = message.replace(said, meant)
    hint = found.hint
    if hint is not None and "inventory" in hint:
        hint = HINTS["inventory"]
    return replace(found, message=message, hint=hint)
