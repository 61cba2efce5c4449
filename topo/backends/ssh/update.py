"""``topo apply`` on the ssh backend: where the executables a change adds go, and whether
the target modules it adds import on the hosts that will run them.

A changed program is placed by the rules of the start (``placement.place``) around what
runs: every executable that goes on keeps its host and counts there; only the new ones
are placed, on hosts that are up; the ones the change removes stay where they are until
they end, counted nowhere. The new modules are checked on their hosts with the path the
run's agents have (the one they started with): nothing is shipped or installed by a
change. Pure but for ``check_imports``, which runs one command per host.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping

from topo.backends.ssh.hostcheck import CHECK_TIMEOUT_S, check_script, missing_imports
from topo.backends.ssh.inventory import HostSpec, Inventory
from topo.backends.ssh.placement import Placement, place, requirements
from topo.backends.ssh.prepare import Prepared
from topo.backends.worker import target_modules
from topo.diagnostics import Diagnostic, SourcePos, TopoError
from topo.ir import Program

RunAll = Callable[[Mapping[str, str], float], Mapping[str, tuple[int | None, str, str]]]


def placement_after(
    program: Program,
    current: Placement,
    inventory: Inventory,
    up: Collection[str],
    running: Program | None = None,
) -> Placement:
    """Where each executable of ``program`` runs once the running program (placed as
    ``current``) became it: the running ones where they are -- but for those whose host
    requirements (labels, host set, spread) the change alters, compared with
    ``running``: they restart, and are placed again -- the new ones on hosts in ``up``.
    Raises ``TopoError`` (a diagnostic per unit that fits nowhere)."""
    now = current.assignment()
    gone = current.leaving
    was = requirements(running) if running is not None else {}
    will = requirements(program)
    stay = {
        e: h
        for e, h in now.items()
        if e in program.executable_index and e not in gone and was.get(e, will[e]) == will[e]
    }
    leaving = {e: h for e, h in now.items() if e not in program.executable_index}
    return place(program, inventory, running=stay, up=up, leaving=leaving)


def check_change(
    program: Program,
    running: Program,
    current: Placement,
    up: Collection[str],
    inventory: Inventory,
    prepared: Prepared,
) -> list[Diagnostic]:
    """What refuses changing ``running`` (placed as ``current``) into ``program``: a new
    executable no host in ``up`` can take, a new target module that does not import on a
    host that would run it."""
    try:
        placement = placement_after(program, current, inventory, up, running)
    except TopoError as error:
        return list(error.diagnostics)
    hosts = {h.name: h for h in inventory.hosts if h.name in up}  # (a lost host runs nothing)
    run_all = prepared.sessions.run_all
    return check_imports(
        program, running, placement, hosts, prepared.command, run_all, prepared.note()
    )


def new_modules(program: Program, running: Program) -> list[str]:
    """The target modules ``program`` imports that the running program does not."""
    had = set(target_modules(running))
    return [m for m in target_modules(program) if m not in had]


def modules_by_host(
    program: Program, modules: list[str], placement: Placement
) -> dict[str, list[str]]:
    """Host -> the ``modules`` its executables of ``program`` import."""
    wanted = set(modules)
    out: dict[str, list[str]] = {}
    for node in program.nodes:
        module = program.target_of(node.id).partition(":")[0]
        host = placement.where(node.executable)
        if module in wanted and host is not None:
            mods = out.setdefault(host, [])
            if module not in mods:
                mods.append(module)
    return out


def check_imports(
    program: Program,
    running: Program,
    placement: Placement,
    hosts: Mapping[str, HostSpec],
    command: Callable[[HostSpec, list[str]], str],
    run_all: RunAll,
    path_note: str,
) -> list[Diagnostic]:
    """An error per new target module of ``program`` that does not import on a host of
    ``hosts`` that will run it (``command(host, argv)``: the host's python with the
    agents' path; ``run_all``: the sessions' ``run_all``; ``path_note``: that path, for
    the hint)."""
    modules = new_modules(program, running)
    if not modules:
        return []
    wanted = {h: m for h, m in modules_by_host(program, modules, placement).items() if h in hosts}
    commands = {h: command(hosts[h], ["-c", check_script(mods)]) for h, mods in wanted.items()}
    found = run_all(commands, CHECK_TIMEOUT_S) if commands else {}
    out = []
    for host in [h for h in hosts if h in found]:
        missing = missing_imports(*found[host])
        spec = hosts[host]
        if isinstance(missing, str):
            out.append(Diagnostic(f"host {host} ({spec.address}) could not be checked: {missing}"))
            continue
        for module, why in missing.items():
            out.append(
                Diagnostic(
                    f"{_users(program, module)}: target module {module} does not import on "
                    f"host {host} ({spec.address}), which would run it: {why}",
                    _origin(program, module),
                    hint=f"the hosts import as the run's agents do, from {path_note}; a "
                    "module found elsewhere needs a new run (or a place on that path)",
                )
            )
    return out


def _groups(program: Program, module: str) -> list[str]:
    return list(
        dict.fromkeys(
            n.group for n in program.nodes if program.target_of(n.id).partition(":")[0] == module
        )
    )


def _users(program: Program, module: str) -> str:
    groups = _groups(program, module)
    return ("groups " if len(groups) > 1 else "group ") + ", ".join(repr(g) for g in groups)


def _origin(program: Program, module: str) -> SourcePos | None:
    groups = _groups(program, module)
    return program.group_index[groups[0]].origin if groups else None
