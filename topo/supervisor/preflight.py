"""What the launcher checks before it starts anything, as diagnostics.

Node kinds the runtime cannot run, target modules that cannot be imported, and
whatever the backend says it cannot honour (``Backend.check``; for a change to a
running program, ``Backend.check_update``). Each diagnostic points at the group (its
``file:line:col``), so ``topo run`` prints it like any other bad input.
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
    kinds_of: dict[str, list[str]] = {}  # group -> its nodes' kinds (nodes may have their own)
    for n in program.nodes:
        kinds = kinds_of.setdefault(n.group, [])
        if program.kind_of(n.id) not in kinds:
            kinds.append(program.kind_of(n.id))
    for g in program.groups:
        for kind in kinds_of.get(g.name, []):
            if kind not in names:
                out.append(
                    Diagnostic(
                        f"group {g.name!r}: unknown node kind {kind!r}",
                        g.origin,
                        hint=f"known kinds: {', '.join(sorted(names))}",
                    )
                )
                continue
            why = get_kind(kind).runnable
            if why is not True:
                why = why or f"node kind {kind!r} is not supported by topo run yet"
                out.append(
                    Diagnostic(
                        f"group {g.name!r}: {why}",
                        g.origin,
                        hint=f"kinds topo run can run: {runnable}",
                    )
                )
    return out


def missing_modules(program: Program) -> list[Diagnostic]:
    """Target modules that cannot be imported (after putting the import roots on the
    path), one diagnostic per group that uses one."""
    problems = prepare_imports(program, target_modules(program))
    out, placed = [], set()
    for n in program.nodes:
        module = program.target_of(n.id).partition(":")[0]
        if module in problems and module not in placed:
            g = program.group_of(n.id)
            out.append(Diagnostic(f"group {g.name!r}: {problems[module]}", g.origin))
            placed.add(module)
    return out + [Diagnostic(m) for module, m in problems.items() if module not in placed]


# Kinds whose server authenticates nobody: topo isolates it in a network namespace.
ISOLATED_KINDS = ("reverb",)


def exposure_warnings(program: Program, on_this_machine: bool = True) -> list[Diagnostic]:
    """One warning per group of an isolated kind when this machine cannot make the
    private network namespace its server needs (its port would then be open to every
    host and local user). Only for backends running on this machine: elsewhere each
    node checks on its own host and says so in the run's output."""
    groups = {n.group for n in program.nodes if program.kind_of(n.id) in ISOLATED_KINDS}
    if not groups or not on_this_machine:
        return []
    from topo.runtime.isolation import isolation_unavailable

    why = isolation_unavailable()
    if why is None:
        return []
    return [
        Diagnostic(
            f"group {g.name!r}: its Reverb server cannot be isolated on this machine ({why}); "
            "its port will be open to every host and local user",
            g.origin,
            hint="allow unprivileged user namespaces (sysctl user.max_user_namespaces, "
            "kernel.unprivileged_userns_clone) or run where unshare(2) is permitted",
            severity="warning",
        )
        for g in program.groups
        if g.name in groups
    ]


def preflight(program: Program, backend: Backend) -> list[Diagnostic]:
    """Every problem found before a run starts (errors refuse it, warnings are shown)."""
    found = unsupported_kinds(program) or missing_modules(program) or list(backend.check(program))
    if any(d.severity == "error" for d in found):
        return found
    return found + exposure_warnings(program, backend.network().mechanism == "plain")


def preflight_update(program: Program, backend: Backend) -> list[Diagnostic]:
    """Every problem found before a running program becomes ``program`` (``topo apply``):
    as :func:`preflight`, with what the running backend cannot change
    (``Backend.check_update``; its ``check`` prepares a run and is not asked again)."""
    found = (
        unsupported_kinds(program)
        or missing_modules(program)
        or list(backend.check_update(program))
    )
    if any(d.severity == "error" for d in found):
        return found
    return found + exposure_warnings(program, backend.network().mechanism == "plain")
