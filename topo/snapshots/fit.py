"""Whether a snapshot fits a program: the same program for ``--resume``; for ``--fork``,
every saved state must still have its node, built by the same target."""

from __future__ import annotations

from pathlib import Path

from topo.ir import Program
from topo.ir.structure import node_target, structure_digest
from topo.rundir.snapshots import Snapshot, SnapshotError, read_snapshot

SHOWN = 4  # nodes named in a refusal; the others are counted


def check_fit(program: Program, snapshot: Snapshot | str | Path, *, same_program: bool) -> Snapshot:
    """The snapshot (given, or read from its directory) once it is known to fit
    ``program`` and its state files are whole; else one ``SnapshotError`` naming the
    snapshot, the program it belongs to, the nodes and what differs."""
    if not isinstance(snapshot, Snapshot):
        snapshot = read_snapshot(Path(snapshot))
    problems = []
    missing = [n for n in sorted(snapshot.nodes) if n not in program.node_index]
    if len(missing) == 1:
        problems.append(f"node {missing[0]!r} has a saved state but is not in this program")
    elif missing:
        named = ", ".join(repr(n) for n in missing[:SHOWN])
        more = f" and {len(missing) - SHOWN} more" if len(missing) > SHOWN else ""
        problems.append(f"{len(missing)} saved states have no node in it: {named}{more}")
    for node_id, entry in sorted(snapshot.nodes.items()):
        if node_id not in program.node_index:
            continue
        now = node_target(program, node_id)
        if entry.target and entry.target != now:
            problems.append(
                f"node {node_id!r} was built by {entry.target} when saved, now by {now}"
            )
    digest = structure_digest(program)
    if same_program and not problems and snapshot.structure != digest:
        problems.append(
            "the program's structure (its nodes, kinds, targets or wiring) is not the one "
            "the snapshot was taken of"
        )
    if problems:
        hint = ""
        if same_program:
            hint = "; to start a new run from it where the states still fit, use --fork"
        raise SnapshotError(f"{_whose(snapshot, program, digest)}: {'; '.join(problems)}{hint}")
    snapshot.verify()
    return snapshot


def _whose(snapshot: Snapshot, program: Program, digest: str) -> str:
    """``snapshot 3 of run R belongs to program 'a' (structure …), not to program 'b'
    (structure …)``; of the same program's name: ``… of program 'a' (structure …) does
    not fit program 'a' as it is now (structure …)``."""
    run_dir = snapshot.path.parent.parent
    head = f"snapshot {snapshot.number} of run {run_dir}"
    theirs = f"program {snapshot.program!r} (structure {snapshot.structure[:12]})"
    if snapshot.program != program.name:
        ours = f"program {program.name!r} (structure {digest[:12]})"
        return f"{head} belongs to {theirs}, not to {ours}"
    return f"{head} of {theirs} does not fit it as it is now (structure {digest[:12]})"
