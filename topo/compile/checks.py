"""Whole-graph checks placed in the YAML: the IR's own checks (:mod:`topo.ir.checks`) at
file:line:col, and the optional imports and signatures that need the Spec."""

from __future__ import annotations

from collections.abc import Mapping

from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Executable, Group, Program
from topo.ir.checks import Problem
from topo.ir.checks import check_graph as ir_check_graph
from topo.kinds import get_kind
from topo.loader.models import GroupSpec
from topo.loader.read import LoadedSpec
from topo.syntax.source import PathKey, SourceMap
from topo.targets import TargetError, TargetInfo, import_target


def problem_path(problem: Problem) -> PathKey:
    """Where the YAML says what a graph problem is about: the colocation entry, the
    ``colocation:`` list for an executable, else the group's setting."""
    if problem.colocation is not None:
        return ("colocation", problem.colocation, *problem.setting)
    if problem.executable:
        return ("colocation",)
    if problem.group:
        return ("nodes", problem.group, *problem.setting)
    return ()


def problem_diagnostic(problem: Problem, sources: SourceMap) -> Diagnostic:
    """A graph problem found on the IR as a diagnostic at file:line:col."""
    return Diagnostic(problem.message, sources.pos(problem_path(problem)), problem.hint)


def check_graph(
    groups: list[Group], executables: list[Executable], sources: SourceMap
) -> list[Diagnostic]:
    """Checks that need every group and executable at once (:func:`topo.ir.checks.check_graph`),
    placed in the YAML."""
    return [problem_diagnostic(p, sources) for p in ir_check_graph(groups, executables)]


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
    g: Group, target: str, info: TargetInfo, loaded: LoadedSpec, builtin: set[str]
) -> list[Diagnostic]:
    """Bind each replica's argument names (references count as given) to the target's
    signature: an unexpected argument is reported where it is written, a missing one at
    the group."""
    if info.params is None:  # builtins and C callables without a signature
        return []
    gspec = loaded.spec.nodes[g.name]
    accepts_any = any(kind == "VAR_KEYWORD" for _, kind, _ in info.params)
    by_name = ("POSITIONAL_OR_KEYWORD", "KEYWORD_ONLY")
    known = [name for name, kind, _ in info.params if kind in by_name]
    positional = (*by_name, "POSITIONAL_ONLY")
    required = [n for n, kind, default in info.params if not default and kind in positional]
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


def checked_targets(program: Program, loaded: LoadedSpec) -> list[str]:
    """Every target ``check_imports`` imports (of the enabled groups), once each."""
    found = [t for g in program.groups if g.enabled for _, t, _ in _imports_of(g, loaded)]
    return list(dict.fromkeys(found))


def check_imports(
    program: Program,
    loaded: LoadedSpec,
    *,
    imports_here: bool = True,
    described: Mapping[str, TargetInfo | str] | None = None,
) -> list[Diagnostic]:
    """Import every target the way ``topo run`` does (``--check-imports``, and ``topo run``
    before it starts anything) and check each node's arguments against its target's
    signature; raises ``TopoError`` with every error, returns warnings about nodes nothing
    reaches. ``described`` holds targets imported elsewhere (by the procs fork server):
    their ``TargetInfo``, or why they do not import; they are not imported here. Without
    ``imports_here`` (the nodes run in another environment) a target whose import fails
    here is skipped: only the targets that import are checked."""
    infos: dict[str, TargetInfo | str] = dict(described or {})
    errors: list[Diagnostic] = []
    incoming = {e.dst for e in program.edges}
    for g in program.groups:
        if not g.enabled:
            continue
        kind = get_kind(g.kind)
        for field, target, builds in _imports_of(g, loaded):
            where = loaded.sources.pos(("nodes", g.name, field))
            info = infos.get(target)
            if info is None:
                try:
                    info = TargetInfo.of(import_target(target, program.source))
                except TargetError as exc:
                    info = str(exc)
                infos[target] = info
            if isinstance(info, str):  # why it does not import
                if imports_here:
                    errors.append(Diagnostic(f"group '{g.name}': {info}", where))
                continue
            if not info.can_call:
                errors.append(
                    Diagnostic(
                        f"group '{g.name}': '{target}' is a {info.type_name}, "
                        "not something that can be called",
                        where,
                    )
                )
                continue
            if not builds:
                continue
            builtin = set(kind.args(loaded.spec.nodes[g.name].options()))
            errors.extend(_signature_problems(g, target, info, loaded, builtin))
            if kind.served and kind.builtin_target is None and info.is_class:
                has_run = info.has_run
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
