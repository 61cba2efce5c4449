"""Who may call whom: the IR's edges are the authority.

A node may call the nodes its arguments refer to (its out-edges), and those whose
handles it is passed at run time; nothing else. The launcher, and the user of
``topo.launch``, may call every node. Backends turn this into each executable's grant;
``topo plan`` prints it.
"""

from __future__ import annotations

from topo.ir.program import Program

_LIST_AT_MOST = 6  # callees listed by name before "... and N more"


def callees(program: Program) -> dict[str, tuple[str, ...]]:
    """Node id -> the nodes it may call (its edges' targets, in first-seen order)."""
    out: dict[str, dict[str, None]] = {n.id: {} for n in program.nodes}
    for edge in program.edges:
        out.setdefault(edge.src, {})[edge.dst] = None
    return {n: tuple(d) for n, d in out.items()}


def executable_callees(
    program: Program, exe_id: str, table: dict[str, tuple[str, ...]] | None = None
) -> tuple[str, ...]:
    """The nodes some node of executable ``exe_id`` may call (``table``: ``callees``)."""
    table = callees(program) if table is None else table
    seen: dict[str, None] = {}
    for node_id in program.executable_index[exe_id].nodes:
        seen.update(dict.fromkeys(table.get(node_id, ())))
    return tuple(seen)


def _names(program: Program, groups: dict[str, list[str]], node_ids: tuple[str, ...]) -> str:
    """``learner/0, actor (all 8)``: whole groups folded, long lists cut."""
    if not node_ids:
        return "(no node)"
    wanted = set(node_ids)
    parts: list[str] = []
    done: set[str] = set()
    for node_id in node_ids:
        if node_id in done:
            continue
        group = program.node_index[node_id].group
        members = groups[group]
        if len(members) > 1 and wanted.issuperset(members):
            parts.append(f"{group} (all {len(members)})")
            done.update(members)
        else:
            parts.append(node_id)
            done.add(node_id)
    if len(parts) > _LIST_AT_MOST:
        parts = [*parts[:_LIST_AT_MOST], f"... and {len(parts) - _LIST_AT_MOST} more"]
    return ", ".join(parts)


def format_rights(program: Program) -> str:
    """The ``topo plan`` section: for each group, the nodes its nodes may call (one line
    per group when its nodes agree, else one per node)."""
    table = callees(program)
    groups: dict[str, list[str]] = {}
    for node in program.nodes:
        groups.setdefault(node.group, []).append(node.id)
    lines = [
        "who may call whom (a node's references; the launcher and topo.launch's user "
        "may call every node; a handle passed in a call passes its right on):"
    ]
    for group in program.groups:
        nodes = groups.get(group.name, [])
        if not nodes:
            continue
        sets = {table.get(n, ()) for n in nodes}
        if len(sets) == 1:
            who = nodes[0] if len(nodes) == 1 else f"{group.name} (each of {len(nodes)})"
            lines.append(f"  {who} -> {_names(program, groups, next(iter(sets)))}")
            continue
        for n in nodes:
            lines.append(f"  {n} -> {_names(program, groups, table.get(n, ()))}")
    return "\n".join(lines)
