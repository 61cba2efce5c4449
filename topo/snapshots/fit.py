"""Whether a snapshot fits a program: the same program for ``--resume``; for ``--fork``,
every saved state must still have its node, built by the same target."""

from __future__ import annotations

from pathlib import Path

from topo.ir import Program
from topo.ir.structure import node_target, structure_digest
from topo.snapshots.store import Snapshot, SnapshotError, read_snapshot


def check_fit(program: Program, path: Path, *, same_program: bool) -> Snapshot:
    """The snapshot in ``path`` once it is known to fit ``program`` and its state files
    are whole; else one ``SnapshotError`` naming the snapshot, the nodes and what differs."""
    snapshot = read_snapshot(path)
    problems = []
    for node_id, entry in sorted(snapshot.nodes.items()):
        if node_id not in program.node_index:
            problems.append(f"node {node_id!r} has a saved state but is not in this program")
            continue
        now = node_target(program, node_id)
        if entry.target and entry.target != now:
            problems.append(
                f"node {node_id!r} was built by {entry.target} when saved, now by {now}"
            )
    if same_program and not problems and snapshot.structure != structure_digest(program):
        problems.append(
            "the program's structure (its nodes, kinds, targets or wiring) is not the one "
            "the snapshot was taken of"
        )
    if problems:
        hint = ""
        if same_program:
            hint = "; to start a new run from it where the states still fit, use --fork"
        raise SnapshotError(
            f"snapshot {snapshot.path} does not fit program {program.name!r}: "
            + "; ".join(problems)
            + hint
        )
    snapshot.verify()
    return snapshot
