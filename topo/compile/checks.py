"""Whole-graph checks placed in the YAML: the IR's own checks (:mod:`topo.ir.checks`) at
file:line:col, and the optional imports and signatures that need the Spec."""

from __future__ import annotations

import inspect

from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Executable, Group, Program
from topo.ir.checks import Problem
from topo.ir.checks import check_graph as ir_check_graph
from topo.kinds import get_kind
from topo.loader.models import GroupSpec
from topo.loader.read import LoadedSpec
from topo.syntax.source import PathKey, SourceMap
from topo.targets import TargetError, import_target


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


def check_imports(
    program: Program, loaded: LoadedSpec, *, imports_here: bool = True
) -> list[Diagnostic]:
    """Import every target the way ``topo run`` does (``--check-imports``, and ``topo run``
    before it starts anything) and check each node's arguments against its target's
    signature; raises ``TopoError`` with every error, returns warnings about nodes nothing
    reaches. Without ``imports_here`` (the nodes run in another environment) a target
    whose import fails here is skipped: only the targets that import are checked."""
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
                if imports_here:
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
