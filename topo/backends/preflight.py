"""What the launcher checks before it starts anything, as diagnostics.

Node kinds the runtime cannot run, target modules that cannot be imported, and
whatever the backend says it cannot honour (``Backend.check``). Each diagnostic
points at the group (its ``file:line:col``), so ``topo run`` prints it like any
other bad input.
"""

from __future__ import annotations

from topo.backends.base import Backend
from topo.backends.imports import prepare_imports
from topo.backends.worker import supported_kinds, target_modules
from topo.diagnostics import Diagnostic
from topo.ir import Program
from topo.kinds import all_kinds, get_kind


def unsupported_kinds(program: Program) -> list[Diagnostic]:
    """Groups whose node kind this runtime cannot run (unknown, or not runnable yet)."""
    out = []
    names = {k.name for k in all_kinds()}
    runnable = ", ".join(sorted(supported_kinds()))
    for g in program.groups:
        if not (g.enabled and g.count):
            continue
        if g.kind not in names:
            out.append(
                Diagnostic(
                    f"group {g.name!r}: unknown node kind {g.kind!r}",
                    g.origin,
                    hint=f"known kinds: {', '.join(sorted(names))}",
                )
            )
            continue
        why = get_kind(g.kind).runnable
        if why is not True:
            why = why or f"node kind {g.kind!r} is not supported by topo run yet"
            out.append(
                Diagnostic(
                    f"group {g.name!r}: {why}", g.origin, hint=f"kinds topo run can run: {runnable}"
                )
            )
    return out


def missing_modules(program: Program) -> list[Diagnostic]:
    """Target modules that cannot be imported (after putting the import roots on the
    path), one diagnostic per group that uses one."""
    problems = prepare_imports(program, target_modules(program))
    out, placed = [], set()
    for g in program.groups:
        module = g.target.partition(":")[0] if g.target else ""
        if g.enabled and module in problems:
            out.append(Diagnostic(f"group {g.name!r}: {problems[module]}", g.origin))
            placed.add(module)
    return out + [Diagnostic(m) for module, m in problems.items() if module not in placed]


def preflight(program: Program, backend: Backend) -> list[Diagnostic]:
    """Every problem found before a run starts (errors refuse it, warnings are shown)."""
    return unsupported_kinds(program) or missing_modules(program) or list(backend.check(program))
