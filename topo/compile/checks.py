"""Whole-graph checks after expansion: primaries, colocation rules, and optional imports."""

from __future__ import annotations

import inspect

from topo.compile.refs import GroupTable
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Executable, Group, Program
from topo.kinds import get_kind
from topo.loader.models import GroupSpec
from topo.loader.read import LoadedSpec
from topo.syntax.source import PathKey, SourceMap
from topo.targets import TargetError, import_target


def check_graph(
    groups: list[Group], executables: list[Executable], table: GroupTable, sources: SourceMap
) -> list[Diagnostic]:
    """Checks that need every group and executable at once."""
    errors: list[Diagnostic] = []
    by_name = {g.name: g for g in groups}
    secondaries: dict[str, list[Group]] = {}
    for g in groups:
        if g.primary is None or not g.enabled:
            continue
        where = sources.pos(("nodes", g.name, "primary"))
        p = by_name.get(g.primary)
        if p is None:
            errors.append(
                Diagnostic(f"group '{g.name}': primary '@{g.primary}' does not exist", where)
            )
        elif p.name == g.name:
            errors.append(Diagnostic(f"group '{g.name}' cannot be its own primary", where))
        elif not p.enabled:
            errors.append(
                Diagnostic(f"group '{g.name}': its primary '{p.name}' is disabled", where)
            )
        elif not p.singleton:
            errors.append(
                Diagnostic(
                    f"group '{g.name}': primary '{p.name}' must be a single node (no count)",
                    where,
                    "secondaries follow exactly one primary, as Acme's secondary learners do",
                )
            )
        elif p.primary is not None:
            errors.append(
                Diagnostic(
                    f"group '{g.name}': primary '{p.name}' is itself a secondary of '{p.primary}'",
                    where,
                    f"point '{g.name}' at '{p.primary}' directly",
                )
            )
        else:
            secondaries.setdefault(p.name, []).append(g)

    for exe in executables:
        if exe.mode != "set":
            continue
        members = {n.split("/")[0] for n in exe.nodes}
        for name in sorted(members):
            followers = [s for s in secondaries.get(name, []) if s.count > 0]
            if followers and len(members) > 1:
                others = ", ".join(sorted(members - {name}))
                n = sum(s.count for s in followers)
                errors.append(
                    Diagnostic(
                        f"'{name}' is thread-colocated with {others} in '{exe.id}', but it has "
                        f"{n} secondary node(s) in {', '.join(s.name for s in followers)}; "
                        "colocating the learner with replay is only possible with a single learner",
                        sources.pos(("colocation",)),
                        "set the secondary count to 0 (e.g. -p num_learners=1) "
                        "or remove the colocation",
                    )
                )
        policies = {by_name[m].restart for m in members}
        if len(policies) > 1:
            errors.append(
                Diagnostic(
                    f"the groups in '{exe.id}' ({', '.join(sorted(members))}) have different "
                    "restart policies, but they share one process and restart together",
                    sources.pos(("colocation",)),
                    "give them the same restart: settings",
                )
            )
    return errors


def _replica_arg_names(
    g: Group, gspec: GroupSpec, builtin: set[str]
) -> dict[frozenset[str], str | None]:
    """The distinct sets of argument names the replicas get -> the override key adding to it."""
    base = builtin | set(gspec.args)
    sets: dict[frozenset[str], str | None] = {}
    for replica in range(g.count):
        key = str(replica) if str(replica) in gspec.overrides else None
        extra = set(gspec.overrides[key]) if key is not None else set()
        sets.setdefault(frozenset(base | extra), key)
    return sets


def _written_at(g: Group, gspec: GroupSpec, name: str, override: str | None) -> PathKey:
    """Where argument ``name`` of the group is written: in args, an override, a kind field."""
    if name in gspec.args:
        return ("nodes", g.name, "args", name)
    if override is not None and name in gspec.overrides[override]:
        return ("nodes", g.name, "overrides", override, name)
    if name in gspec.model_fields_set:
        return ("nodes", g.name, name)
    return ("nodes", g.name)


def _signature_problems(
    g: Group, target: str, obj: object, loaded: LoadedSpec, builtin: set[str]
) -> list[Diagnostic]:
    """Bind each replica's argument names (references count as given) to ``obj``'s
    signature: an unexpected argument is reported where it is written, a missing one at
    the group."""
    try:
        params = inspect.signature(obj).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):  # builtins and C callables without a signature
        return []
    gspec = loaded.spec.nodes[g.name]
    accepts_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
    by_name = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    known = [k for k, p in params.items() if p.kind in by_name]
    positional = (*by_name, inspect.Parameter.POSITIONAL_ONLY)
    required = [k for k, p in params.items() if p.default is p.empty and p.kind in positional]
    errors: list[Diagnostic] = []
    seen: set[str] = set()
    for names, override in _replica_arg_names(g, gspec, builtin).items():
        unexpected = [] if accepts_any else sorted(n for n in names if n not in known)
        missing = [k for k in required if k not in names]
        for name in unexpected:
            if name not in seen:
                seen.add(name)
                errors.append(
                    Diagnostic(
                        f"group '{g.name}': {target} takes no argument '{name}'",
                        loaded.sources.pos(_written_at(g, gspec, name, override), key=True),
                        f"its arguments: {', '.join(known)}" if known else None,
                    )
                )
        for name in missing:
            if name not in seen:
                seen.add(name)
                errors.append(
                    Diagnostic(
                        f"group '{g.name}': {target} needs the argument '{name}', "
                        "which args does not give",
                        loaded.sources.pos(("nodes", g.name), key=True),
                        f"add it under args:  {name}: ...",
                    )
                )
    return errors


def _imports_of(g: Group, loaded: LoadedSpec) -> list[tuple[str, str, bool]]:
    """(YAML field, target, is what builds the node) for every import the kind declares."""
    kind = get_kind(g.kind)
    gspec = loaded.spec.nodes[g.name]
    out = []
    if kind.builtin_target is not None and kind.runnable is True:
        out.append(("kind", kind.builtin_target, True))
    for field in kind.import_fields:
        value = getattr(gspec, field, None)
        if isinstance(value, str):
            out.append((field, value, field == "target" and kind.builtin_target is None))
    return out


def check_imports(program: Program, loaded: LoadedSpec) -> list[Diagnostic]:
    """Import every target the way ``topo run`` does (``--check-imports``) and check each
    node's arguments against its target's signature; returns warnings about nodes nothing
    reaches."""
    errors: list[Diagnostic] = []
    incoming = {e.dst for e in program.edges}
    for g in program.groups:
        if not g.enabled:
            continue
        kind = get_kind(g.kind)
        for field, target, builds in _imports_of(g, loaded):
            where = loaded.sources.pos(("nodes", g.name, field))
            try:
                obj = import_target(target, program.source)
            except TargetError as exc:
                errors.append(Diagnostic(f"group '{g.name}': {exc}", where))
                continue
            if not callable(obj):
                errors.append(
                    Diagnostic(
                        f"group '{g.name}': '{target}' is a {type(obj).__name__}, "
                        "not something that can be called",
                        where,
                    )
                )
                continue
            if not builds:
                continue
            builtin = set(kind.args(loaded.spec.nodes[g.name].options()))
            errors.extend(_signature_problems(g, target, obj, loaded, builtin))
            if kind.served and kind.builtin_target is None and inspect.isclass(obj):
                has_run = callable(getattr(obj, "run", None))
                reachable = any(n.id in incoming for n in program.nodes_of(g.name))
                if not has_run and not reachable and not g.stops_program:
                    errors.append(
                        Diagnostic(
                            f"group '{g.name}': nothing holds a handle to it and "
                            f"{target} has no run(), so it would never do anything",
                            loaded.sources.pos(("nodes", g.name), key=True),
                            severity="warning",
                        )
                    )
    if any(d.severity == "error" for d in errors):
        raise TopoError(errors)
    return errors
