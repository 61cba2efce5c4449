"""Colocation from YAML: the ``colocation:`` entries' references resolved to nodes, packed
into executables by :func:`topo.ir.packing.pack` (the packing rules every front end
shares), and its problems placed at the YAML that asks for them."""

from __future__ import annotations

from topo.compile.checks import problem_diagnostic
from topo.compile.refs import GroupTable, RefError
from topo.diagnostics import Diagnostic
from topo.ir import Group
from topo.ir.packing import Colocation, Packing
from topo.ir.packing import pack as pack_nodes
from topo.loader.models import ColocationSpec
from topo.syntax.source import SourceMap

__all__ = ["Packing", "pack"]


def pack(
    groups: list[Group],
    table: GroupTable,
    colocation: list[ColocationSpec],
    sources: SourceMap,
    errors: list[Diagnostic],
) -> Packing:
    """Thread sets first, then per-process chunks, then one executable per remaining node;
    appends to ``errors`` what is wrong, entry by entry, then for the whole."""
    requests: list[Colocation] = []
    found: list[list[Diagnostic]] = []  # per entry: its references that do not resolve
    for i, spec in enumerate(colocation):
        members: list[str] = []
        found.append([])
        for j, entry in enumerate(spec.nodes):
            try:
                members.extend(table.resolve_nodes(entry))
            except RefError as exc:
                where = sources.pos(("colocation", i, "nodes", j))
                found[i].append(Diagnostic(str(exc), where, exc.hint))
        requests.append(Colocation(tuple(members), spec.mode, spec.name or ""))
    packing = pack_nodes(
        {g.name: table.node_ids.get(g.name, ()) for g in groups},
        requests,
        per_process={g.name: g.per_process for g in groups if g.per_process is not None},
        spread=[g.name for g in groups if g.resources.spread],
    )
    for i, refs in enumerate(found):
        errors.extend(refs)
        errors.extend(problem_diagnostic(p, sources) for p in packing.problems if p.colocation == i)
    errors.extend(problem_diagnostic(p, sources) for p in packing.problems if p.colocation is None)
    return packing
