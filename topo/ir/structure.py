"""A program's structure as one digest: which nodes, of which kind and target, wired how.

Two programs with the same structure can take each other's snapshots; parameters that
change no node, kind, target or edge (a step budget, a learning rate) leave it alone.
"""

from __future__ import annotations

import hashlib
import json

from topo.ir.program import Program


def node_target(program: Program, node_id: str) -> str:
    """What builds the node: its target, or the description of its pickled factory."""
    node = program.node(node_id)
    if node.factory is not None:
        return f"factory:{node.factory.description}"
    return program.target_of(node_id)


def structure_digest(program: Program) -> str:
    """sha256 of the program's nodes (id, kind, target) and edges, in a stable order."""
    shape = {
        "nodes": sorted(
            [n.id, program.kind_of(n.id), node_target(program, n.id)] for n in program.nodes
        ),
        "edges": sorted([e.src, e.dst, e.arg] for e in program.edges),
    }
    return hashlib.sha256(json.dumps(shape, separators=(",", ":")).encode()).hexdigest()
