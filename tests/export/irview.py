"""A comparable view of a Program IR, and the view a Launchpad program's IR should have
once written as YAML: the same, with node and executable ids mapped through the renames
the exporter reports (groups it split), and nothing else changed.

Ignored, as the exporter cannot carry them: ``origin``, ``description``, ``label``,
``params``, ``source`` and the order of executables. Scalars are compared with their
type (``1``, ``1.0`` and ``True`` differ), opaque values by import path or pickle bytes.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from topo.export import Exported
from topo.ir import FrozenMap, Opaque, Program, Ref, Value
from topo.ir.seeds import derive_seeds
from topo.kinds import get_kind

_GROUP_IGNORED = {"origin", "description", "label", "name"}


def plain(value: Value, ids: dict[str, str] | None = None) -> Any:
    """A value with types kept and references renamed."""
    ids = ids or {}
    if isinstance(value, Ref):
        return ("ref", ids.get(value.node, value.node))
    if isinstance(value, Opaque):
        return ("opaque", value.import_path, value.pickled)
    if isinstance(value, tuple):
        return ("list", [plain(v, ids) for v in value])
    if isinstance(value, FrozenMap):
        return ("map", [(k, plain(v, ids)) for k, v in value.items()])
    return (type(value).__name__, value)


def _fields(obj: Any, skip: set[str] = frozenset()) -> dict[str, Any]:  # type: ignore[assignment]
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in skip}


def view(program: Program, exported: Exported | None = None) -> dict[str, Any]:
    """The IR as nested dicts; with ``exported``, ids mapped to the YAML program's."""
    ids = exported.node_ids if exported else {}
    exes = exported.executable_ids if exported else {}
    vias = exported.edge_via if exported else {}
    new = [ids.get(n.id, n.id) for n in program.nodes]
    seeds = derive_seeds(program.seed, new) if exported else {}
    groups: dict[str, Any] = {}
    nodes: dict[str, Any] = {}
    for n, node_id in zip(program.nodes, new, strict=True):
        name, _, replica = node_id.partition("/")
        nodes[node_id] = {
            "group": name,
            "replica": int(replica or 0),
            "args": plain(n.args, ids),
            "posargs": plain(n.posargs, ids),
            "seed": seeds.get(node_id, n.seed),
            "executable": exes.get(n.executable, n.executable),
            "kind": program.kind_of(n.id),
            "target": program.target_of(n.id),
            "factory": plain(n.factory) if n.factory else None,
            "disable_run": n.disable_run,
            "rpc": program.rpc_of(n.id),
        }
        if name not in groups:
            g = program.group_of(n.id)
            record = _fields(g, _GROUP_IGNORED)
            if exported is not None:  # a split part: its own kind, target, count and rpc
                kind = program.kind_of(n.id)
                record.update(kind=kind, target=program.target_of(n.id), draw=get_kind(kind).draw)
                record.update(rpc=program.rpc_of(n.id), count=0, singleton=node_id == name)
            groups[name] = record
        if exported is not None:
            groups[name]["count"] += 1
    for g in program.groups:
        if not g.enabled:
            groups[g.name] = _fields(g, _GROUP_IGNORED)
    edges = sorted(
        (
            ids.get(e.src, e.src),
            ids.get(e.dst, e.dst),
            e.arg,
            vias.get((ids.get(e.src, e.src), e.arg), e.via),
        )
        for e in program.edges
    )
    executables = {
        exes.get(e.id, e.id): (tuple(ids.get(n, n) for n in e.nodes), e.mode, e.placement)
        for e in program.executables
    }
    top = {
        "name": program.name,
        "seed": program.seed,
        "stop": program.stop,
        "snapshots": program.snapshots,
        "v": program.version,
    }
    return {"program": top, "groups": groups, "nodes": nodes, "edges": edges, "exes": executables}


def differences(expected: dict[str, Any], got: dict[str, Any], path: str = "") -> list[str]:
    """Every place two views differ, as ``path: expected != got`` lines."""
    if isinstance(expected, dict) and isinstance(got, dict):
        out = []
        for key in list(expected) + [k for k in got if k not in expected]:
            where = f"{path}.{key}" if path else str(key)
            if key not in got:
                out.append(f"{where}: missing from the YAML program")
            elif key not in expected:
                out.append(f"{where}: only in the YAML program: {got[key]!r}")
            else:
                out.extend(differences(expected[key], got[key], where))
        return out
    if isinstance(expected, list) and isinstance(got, list) and path.endswith("edges"):
        only_lp = [e for e in expected if e not in got]
        only_yaml = [e for e in got if e not in expected]
        return [f"{path}: only in Python {e}" for e in only_lp] + [
            f"{path}: only in YAML {e}" for e in only_yaml
        ]
    return [] if expected == got else [f"{path}: {expected!r} != {got!r}"]
