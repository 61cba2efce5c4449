"""Stage 2, compile: a validated Spec -> the Program IR.

Expands counts into nodes, packs colocation into executables, derives seeds,
renders every node's arguments (references, round-robin, per-replica values) and
records every edge, then checks the graph as a whole.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from topo.compile.args import ArgCompiler, EdgeSpec, NodeContext, Template, arg_path
from topo.compile.checks import check_graph
from topo.compile.checks import check_imports as run_import_checks
from topo.compile.pack import Packing, pack
from topo.compile.refs import GroupTable, RefError
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import (
    DEFAULT_READY_TIMEOUT_S,
    DEFAULT_STALL_AFTER_S,
    Accelerators,
    Edge,
    FrozenMap,
    Group,
    Node,
    Program,
    Resources,
    RestartPolicy,
    RpcSettings,
    SnapshotSettings,
    StopSettings,
    freeze,
)
from topo.ir.seeds import derive_seeds, key_data
from topo.kinds import UnknownKindError, get_kind
from topo.loader.models import AcceleratorsSpec, GroupSpec, RpcSpec, SnapshotsSpec
from topo.loader.read import LoadedSpec
from topo.syntax.source import SourceMap
from topo.vocab import parse_size


def _rpc(program: RpcSpec | None, group: RpcSpec | None) -> RpcSettings:
    base = RpcSettings()
    values: dict[str, Any] = {}
    for layer in (program, group):
        if layer is not None:
            values.update({k: v for k, v in layer.model_dump().items() if v is not None})
    return RpcSettings(
        threads=values.get("threads", base.threads),
        deadline_s=values.get("deadline_s", base.deadline_s),
        max_message_mb=values.get("max_message_mb", base.max_message_mb),
        call_timeout_s=values.get("call_timeout_s", base.call_timeout_s),
    )


def _snapshots(spec: SnapshotsSpec | None) -> SnapshotSettings:
    """The snapshot settings; none taken without being asked when the section is absent."""
    if spec is None:
        return SnapshotSettings()
    return SnapshotSettings(spec.every_s, spec.keep, spec.at_stop, spec.pause_timeout_s)


def _accelerators(spec: AcceleratorsSpec | None) -> Accelerators | None:
    if spec is None or spec.kind == "none":
        return None
    ids = None if spec.ids is None else tuple(spec.ids)
    count = len(ids) if ids is not None else (spec.count or 1)
    return Accelerators(spec.kind, count, ids, spec.shared)


def _group(name: str, g: GroupSpec, loaded: LoadedSpec) -> Group:
    restart = RestartPolicy()
    if g.restart is not None:
        restart = RestartPolicy(
            g.restart.policy,
            g.restart.max_restarts,
            g.restart.backoff.initial_s,
            g.restart.backoff.max_s,
        )
    resources = Resources()
    if g.resources is not None:
        r = g.resources
        resources = Resources(
            env=FrozenMap({k: _env_value(v) for k, v in r.env.items()}),
            workdir=r.workdir,
            cpus=None if r.cpus is None else tuple(r.cpus),
            gpus=None if r.gpus is None else tuple(r.gpus),
            host_labels=tuple(r.host_labels),
            spread=r.spread,
            memory=None if r.memory is None else parse_size(r.memory),
            accelerators=_accelerators(r.accelerators),
            cpu_only=r.cpu_only,
        )
    kind = get_kind(g.kind)
    target = kind.builtin_target or getattr(g, "target", None) or ""
    count = (1 if g.count is None else g.count) if g.enabled else 0
    primary = g.primary[1:] if g.primary and g.primary.startswith("@") else g.primary
    return Group(
        name=name,
        kind=g.kind,
        target=target,
        count=count,
        enabled=g.enabled,
        singleton=g.count is None,
        per_process=g.colocate.per_process if g.colocate else None,
        restart=restart,
        resources=resources,
        rpc=_rpc(loaded.spec.rpc, g.rpc),
        stops_program=g.stops_program,
        ready_timeout_s=g.ready_timeout_s or DEFAULT_READY_TIMEOUT_S,
        stall_after_s=DEFAULT_STALL_AFTER_S if g.stall_after_s is None else g.stall_after_s,
        primary=primary,
        description=g.description,
        origin=loaded.sources.pos(("nodes", name), key=True),
        draw=kind.draw,
    )


def _env_value(value: str | int | float | bool) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _builtin_args(g: GroupSpec) -> dict[str, Any]:
    """Arguments the group's kind takes from its own YAML fields (reverb tables, cacher source)."""
    return get_kind(g.kind).args(g.options())


def _program_seed(loaded: LoadedSpec) -> int:
    if loaded.spec.seed is not None:
        return loaded.spec.seed
    seed = loaded.param_values.get("seed")
    return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0


def _unknown_kinds(loaded: LoadedSpec) -> list[Diagnostic]:
    """Groups whose kind is not (or no longer) registered."""
    errors = []
    for name, g in loaded.spec.nodes.items():
        try:
            get_kind(g.kind)
        except UnknownKindError as exc:
            errors.append(Diagnostic(str(exc), loaded.sources.pos(("nodes", name, "kind"))))
    return errors


def _node_ids(groups: list[Group]) -> dict[str, tuple[str, ...]]:
    """Group name -> its node ids: ``g`` for a singleton, ``g/0`` ... otherwise."""
    return {
        g.name: ((g.name,) if g.singleton else tuple(f"{g.name}/{i}" for i in range(g.count)))
        if g.enabled
        else ()
        for g in groups
    }


@dataclasses.dataclass
class _Build:
    """What every group's compilation shares and adds to."""

    loaded: LoadedSpec
    table: GroupTable
    packing: Packing
    node_ids: dict[str, tuple[str, ...]]
    seeds: dict[str, int]
    nodes: list[Node] = dataclasses.field(default_factory=list)
    edges: list[Edge] = dataclasses.field(default_factory=list)
    errors: list[Diagnostic] = dataclasses.field(default_factory=list)


def compile_spec(
    loaded: LoadedSpec,
    *,
    check_imports: bool = False,
    warnings: list[Diagnostic] | None = None,
) -> Program:
    """Compile a loaded topology into a Program; raises TopoError with every problem found.

    With ``check_imports`` every target is imported; warnings go to ``warnings``."""
    spec, sources = loaded.spec, loaded.sources
    unknown = _unknown_kinds(loaded)
    if unknown:
        raise TopoError(unknown)
    errors: list[Diagnostic] = []
    groups = [_group(name, g, loaded) for name, g in spec.nodes.items()]
    node_ids = _node_ids(groups)
    table = GroupTable(
        {g.name: g for g in groups}, node_ids, {g.name: str(g.origin) for g in groups}
    )
    packing = pack(groups, table, spec.colocation, sources, errors)
    seed = _program_seed(loaded)
    seeds = derive_seeds(seed, [n for g in groups for n in node_ids[g.name]])
    build = _Build(loaded, table, packing, node_ids, seeds, errors=errors)
    lenient = dataclasses.replace(table, lenient=True)
    for g in groups:
        if g.enabled:
            _compile_group(g, build)
        else:
            errors.extend(_check_disabled(g, spec.nodes[g.name], lenient, sources))
    errors.extend(check_graph(groups, packing.executables, sources))
    if errors:
        raise TopoError(_dedupe(errors))
    program = Program(
        name=spec.name,
        seed=seed,
        params=FrozenMap({k: freeze(v) for k, v in loaded.param_values.items()}),
        groups=tuple(groups),
        nodes=tuple(build.nodes),
        edges=tuple(build.edges),
        executables=tuple(packing.executables),
        stop=StopSettings(spec.stop.grace_s, spec.stop.timeout_s),
        snapshots=_snapshots(spec.snapshots),
        source=loaded.file,
    )
    if check_imports:
        found = run_import_checks(program, loaded)
        if warnings is not None:
            warnings.extend(found)
    return program


def _compile_group(g: Group, build: _Build) -> None:
    """Render the arguments of every replica of an enabled group; add its nodes and edges."""
    loaded, errors = build.loaded, build.errors
    gspec = loaded.spec.nodes[g.name]
    base = ("nodes", g.name, "args")
    compiler = ArgCompiler(build.table, loaded.sources, base)
    raw_args = {**_builtin_args(gspec), **gspec.args}
    templates: dict[str, Template] = {k: compiler.compile(v, (k,)) for k, v in raw_args.items()}
    per_replica = _override_templates(g, gspec, build.table, loaded, errors)
    errors.extend(compiler.errors)
    node_exe = build.packing.node_exe
    exe_index: dict[str, int] = {}
    for node_id in build.node_ids[g.name]:
        exe_index.setdefault(node_exe[node_id], len(exe_index))
    for replica, node_id in enumerate(build.node_ids[g.name]):
        node_seed = build.seeds[node_id]
        scope = dict(loaded.param_values)
        scope.update(
            {
                "replica": replica,
                "node_id": node_id,
                "group": g.name,
                "count": g.count,
                "seed.int": node_seed,
                "seed.key": key_data(node_seed),
            }
        )
        ctx = NodeContext(scope, replica, exe_index[node_exe[node_id]])
        node_edges: list[EdgeSpec] = []
        node_templates = {**templates, **per_replica.get(replica, {})}
        try:
            args = FrozenMap({k: t.render(ctx, node_edges) for k, t in node_templates.items()})
        except TopoError as exc:
            errors.extend(exc.diagnostics)
            if len(errors) > 50:
                break
            continue
        build.edges.extend(_edges(g, node_id, node_edges, loaded.sources, errors))
        build.nodes.append(
            Node(
                node_id,
                g.name,
                replica,
                args,
                node_seed,
                node_exe[node_id],
                disable_run=gspec.disable_run,
            )
        )


def _edges(
    g: Group, node_id: str, found: list[EdgeSpec], sources: SourceMap, errors: list[Diagnostic]
) -> list[Edge]:
    """The IR edges of one node, labelled by its kind (a cacher's source) or as primary."""
    kind = get_kind(g.kind)
    out = []
    for path, dst, via in found:
        if dst == node_id:
            errors.append(
                Diagnostic(
                    f"node '{node_id}' refers to itself in argument '{path}'",
                    sources.pos(("nodes", g.name, "args", path.split(".")[0].split("[")[0])),
                    "a node cannot hold a handle to itself",
                )
            )
            continue
        kind_via = kind.edge_via(path)
        if kind_via is not None:
            via = kind_via
        elif via == "ref" and g.primary is not None and dst == g.primary:
            via = "primary"  # a secondary's handle to its primary
        out.append(Edge(node_id, dst, path, via))
    return out


def _check_disabled(
    g: Group, gspec: GroupSpec, table: GroupTable, sources: SourceMap
) -> list[Diagnostic]:
    """References in a disabled group's args must still name real groups and replicas, so a
    typo shows now rather than when a parameter switches the group on. ``table`` is lenient:
    references to other disabled groups resolve to nothing."""
    errors: list[Diagnostic] = []
    compiler = ArgCompiler(table, sources, ("nodes", g.name, "args"))
    for k, v in {**_builtin_args(gspec), **gspec.args}.items():
        compiler.compile(v, (k,))
    for key, args in gspec.overrides.items():
        over = ArgCompiler(table, sources, ("nodes", g.name, "overrides", key))
        for k, v in args.items():
            over.compile(v, (k,))
        errors.extend(over.errors)
    return compiler.errors + errors


def _override_templates(
    g: Group, gspec: GroupSpec, table: GroupTable, loaded: LoadedSpec, errors: list[Diagnostic]
) -> dict[int, dict[str, Template]]:
    out: dict[int, dict[str, Template]] = {}
    for key, args in gspec.overrides.items():
        where = loaded.sources.pos(("nodes", g.name, "overrides", key), key=True)
        replica = int(key)
        if replica >= g.count:
            errors.append(
                Diagnostic(
                    f"override for replica {replica} of group '{g.name}', which has "
                    f"{g.count} replica(s)",
                    where,
                )
            )
            continue
        unknown = set(args) - set(gspec.args) - set(_builtin_args(gspec))
        if unknown and gspec.args:
            name = sorted(unknown)[0]
            errors.append(
                Diagnostic(
                    f"override of replica {replica} sets '{name}', which group '{g.name}' "
                    "does not pass in args",
                    loaded.sources.pos(("nodes", g.name, "overrides", key, name), key=True),
                    f"args of '{g.name}': {', '.join(gspec.args)}",
                )
            )
            continue
        compiler = ArgCompiler(table, loaded.sources, ("nodes", g.name, "overrides", key))
        out[replica] = {k: compiler.compile(v, (k,)) for k, v in args.items()}
        errors.extend(compiler.errors)
    return out


def _dedupe(errors: list[Diagnostic]) -> list[Diagnostic]:
    """The same problem rendered for many replicas is reported at most three times."""
    per_pos: dict[str, int] = {}
    seen: set[tuple[str, str]] = set()
    out = []
    for d in errors:
        key = (str(d.pos), d.message)
        if key in seen or per_pos.get(str(d.pos), 0) >= 3:
            continue
        seen.add(key)
        per_pos[str(d.pos)] = per_pos.get(str(d.pos), 0) + 1
        out.append(d)
    return out


__all__ = ["RefError", "arg_path", "compile_spec"]
