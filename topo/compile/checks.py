"""Whole-graph checks after expansion: primaries, colocation rules, and optional imports."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

from topo.compile.refs import GroupTable
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Executable, Group, Program
from topo.spec.loader import LoadedSpec
from topo.spec.source import SourceMap


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


def _import_target(target: str) -> Callable[..., object]:
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    obj: object = module
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"'{target}' is a {type(obj).__name__}, not something that can be called")
    return obj


def check_imports(program: Program, loaded: LoadedSpec) -> list[Diagnostic]:
    """Import every target (``--check-imports``); returns warnings about nodes nothing reaches."""
    errors: list[Diagnostic] = []
    spec = loaded.spec
    incoming = {e.dst for e in program.edges}
    for g in program.groups:
        if not g.enabled:
            continue
        gspec = spec.nodes[g.name]
        checks = [("target", g.target)] if g.kind in ("courier", "py") else []
        if g.kind == "reverb" and gspec.tables:
            checks.append(("tables", gspec.tables))
        for field, target in checks:
            where = loaded.sources.pos(("nodes", g.name, field))
            try:
                obj = _import_target(target)
            except ImportError as exc:
                errors.append(
                    Diagnostic(f"group '{g.name}': cannot import '{target}': {exc}", where)
                )
                continue
            except AttributeError:
                module, _, attr = target.partition(":")
                errors.append(
                    Diagnostic(
                        f"group '{g.name}': module '{module}' has no attribute '{attr}'", where
                    )
                )
                continue
            except TypeError as exc:
                errors.append(Diagnostic(f"group '{g.name}': {exc}", where))
                continue
            except Exception as exc:  # importing user code may raise anything
                errors.append(
                    Diagnostic(
                        f"group '{g.name}': importing '{target}' raised "
                        f"{type(exc).__name__}: {exc}",
                        where,
                    )
                )
                continue
            if field == "target" and g.kind == "courier" and inspect.isclass(obj):
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
