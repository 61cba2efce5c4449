"""Which host of the inventory runs which executable of a program.

A unit is an executable, or every executable of one host-colocation set (the IR's
``Executable.placement``), which must share a host. A unit needs every label its
groups ask for (``resources.host_labels``) and room for all its executables under
the host's ``capacity``, and, for a group with ``resources.spread``, a host that runs
no other process of that group. Constrained units are placed first (more labels
first, then spread, then bigger), each on the eligible host with the fewest
executables so far (ties: file order), which spreads the rest evenly. A program
changed while it runs (``topo apply``) is placed the same way around what already runs:
every running executable stays on its host and counts there, and only the new ones are
placed (a host set that gains members gains them on its host). Pure: no SSH, no
processes.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from topo.backends.device_plan import group_asking
from topo.backends.devices import asked
from topo.backends.ssh.inventory import HostSpec, Inventory
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Program

__all__ = ["Placement", "format_placement", "place", "requirements"]


@dataclass(frozen=True)
class _Unit:
    """Executables that go to one host together, and what that host must offer."""

    exes: tuple[str, ...]
    labels: tuple[str, ...]
    groups: tuple[str, ...]
    host_set: str | None
    spread: tuple[str, ...] = ()  # its groups whose processes each need their own host


def _units(program: Program) -> list[_Unit]:
    """The program's executables gathered into placement units, in program order."""
    by_set: dict[str, list[str]] = {}
    order: list[tuple[str | None, str]] = []
    for exe in program.executables:
        if exe.placement is None:
            order.append((None, exe.id))
        else:
            if exe.placement not in by_set:
                order.append((exe.placement, exe.id))
            by_set.setdefault(exe.placement, []).append(exe.id)
    units = []
    for host_set, first in order:
        exes = tuple(by_set[host_set]) if host_set is not None else (first,)
        groups = tuple(
            dict.fromkeys(
                program.node(n).group for e in exes for n in program.executable_index[e].nodes
            )
        )
        labels = tuple(
            dict.fromkeys(
                label for g in groups for label in program.group_index[g].resources.host_labels
            )
        )
        spread = tuple(g for g in groups if program.group_index[g].resources.spread)
        units.append(_Unit(exes, labels, groups, host_set, spread))
    return units


def requirements(program: Program) -> dict[str, tuple[object, ...]]:
    """Executable -> what its host must offer (labels, host set, spread groups): one
    whose requirements a change alters is placed again (it restarts anyway)."""
    return {e: (u.labels, u.host_set, u.spread) for u in _units(program) for e in u.exes}


def _fits(host: HostSpec, labels: Collection[str], load: int, size: int) -> bool:
    return set(labels) <= set(host.labels) and (
        host.capacity is None or load + size <= host.capacity
    )


class Placement:
    """Executable -> host, changed only by :meth:`relocate` (thread-safe: the launcher
    restarts nodes from its own thread)."""

    def __init__(
        self,
        hosts: Sequence[HostSpec],
        assigned: dict[str, str],
        labels: dict[str, tuple[str, ...]],
        host_sets: dict[str, str | None],
        spread: dict[str, tuple[str, ...]] | None = None,
        leaving: Collection[str] = (),
    ) -> None:
        self._hosts = {h.name: h for h in hosts}
        self._spread = spread or {}
        self._order = {exe: i for i, exe in enumerate(assigned)}
        self._assigned = dict(assigned)
        self._labels = labels
        self._host_sets = host_sets
        # executables a change removed that may still run: where they are, counted nowhere
        self._leaving = frozenset(leaving)
        self._lock = threading.Lock()

    def host_of(self, exe_id: str) -> str:
        """The host that runs executable ``exe_id`` (KeyError if there is no such one)."""
        with self._lock:
            return self._assigned[exe_id]

    def where(self, exe_id: str) -> str | None:
        """The host of executable ``exe_id``, None if it has none here."""
        with self._lock:
            return self._assigned.get(exe_id)

    def assignment(self) -> dict[str, str]:
        """Executable -> host, now (leaving executables included)."""
        with self._lock:
            return dict(self._assigned)

    @property
    def leaving(self) -> frozenset[str]:
        """The executables a change removed from the program that may still run."""
        return self._leaving

    def executables_on(self, host: str) -> list[str]:
        """The executables placed on ``host``, in program order."""
        with self._lock:
            return [e for e, h in self._assigned.items() if h == host and e not in self._leaving]

    def as_dict(self) -> dict[str, list[str]]:
        """Host -> its executables, for every host of the inventory in file order (a host
        with nothing placed has an empty list)."""
        with self._lock:
            out: dict[str, list[str]] = {h: [] for h in self._hosts}
            for exe, host in self._assigned.items():
                if exe not in self._leaving:
                    out[host].append(exe)
            return out

    def _load(self, host: str) -> int:
        return sum(1 for e, h in self._assigned.items() if h == host and e not in self._leaving)

    def relocate(self, exe_id: str, alive: Collection[str]) -> str | None:
        """The host to restart ``exe_id`` on, given the hosts still ``alive``: its own if
        alive; else where another member of its host set already runs; else the
        least-loaded alive host with its labels and room (for the members of its set
        still to move, too). None when no host fits (the placement is then unchanged)."""
        with self._lock:
            current = self._assigned[exe_id]
            if current in alive:
                return current
            host_set = self._host_sets.get(exe_id)
            members = [e for e, s in self._host_sets.items() if s is not None and s == host_set]
            for other in members:
                if other != exe_id and self._assigned[other] in alive:
                    self._assigned[exe_id] = self._assigned[other]
                    return self._assigned[exe_id]
            moving = max(1, sum(1 for e in members if self._assigned[e] not in alive))
            labels = self._labels.get(exe_id, ())
            candidates = [
                h
                for name, h in self._hosts.items()
                if name in alive and _fits(h, labels, self._load(name), moving)
            ]
            if not candidates:
                return None
            # a spread group keeps its processes apart while it can; sharing a host beats
            # not running at all
            apart = self._apart(exe_id, candidates)
            candidates = apart or candidates
            best = min(candidates, key=lambda h: self._load(h.name))  # min keeps file order
            self._assigned[exe_id] = best.name
            return best.name

    def _apart(self, exe_id: str, hosts: list[HostSpec]) -> list[HostSpec]:
        """``hosts`` that run no other process of ``exe_id``'s spread groups."""
        mine = set(self._spread.get(exe_id, ()))
        if not mine:
            return hosts
        taken = {
            h
            for e, h in self._assigned.items()
            if e != exe_id and e not in self._leaving and mine & set(self._spread.get(e, ()))
        }
        return [h for h in hosts if h.name not in taken]


def _who(unit: _Unit) -> str:
    """The unit as the subject of a sentence: group 'a', host set 'core' (groups ...)."""
    groups = ("groups " if len(unit.groups) > 1 else "group ") + ", ".join(
        f"'{g}'" for g in unit.groups
    )
    if unit.host_set is not None and len(unit.exes) > 1:
        return f"host set '{unit.host_set}' ({len(unit.exes)} executables of {groups})"
    if len(unit.groups) > 1:
        return f"executable '{unit.exes[0]}' ({groups})"
    return groups


def _show_host(host: HostSpec, load: int, lost: bool = False) -> str:
    labels = ", ".join(host.labels) if host.labels else "no labels"
    room = "" if host.capacity is None else f", {load} of capacity {host.capacity} taken"
    return f"{host.name} ({labels}{room}{', lost' if lost else ''})"


def _unplaceable(
    unit: _Unit,
    program: Program,
    inventory: Inventory,
    loads: dict[str, int],
    size: int | None = None,
    up: Collection[str] | None = None,
) -> Diagnostic:
    """Why no host can take ``unit`` (``size`` of its executables; default all): a label
    no host has, or no room left (``up``: the hosts that may take it; default all)."""
    size = len(unit.exes) if size is None else size
    live = [h for h in inventory.hosts if up is None or h.name in up]
    labelled = [h for h in live if set(unit.labels) <= set(h.labels)]
    wanted = [g for g in unit.groups if program.group_index[g].resources.host_labels]
    origin = program.group_index[(wanted or list(unit.groups))[0]].origin
    hosts = "; ".join(
        _show_host(h, loads[h.name], up is not None and h.name not in up) for h in inventory.hosts
    )
    if not labelled and any(set(unit.labels) <= set(h.labels) for h in inventory.hosts):
        return Diagnostic(
            f"{_who(unit)} needs a host{_among(unit)}, and every such host is lost "
            f"(hosts: {hosts})",
            origin,
            "a lost host does not come back within a run: start the new nodes in a new run",
        )
    if not labelled:
        label_text = ", ".join(unit.labels)
        return Diagnostic(
            f"{_who(unit)} needs a host labelled {label_text}, and no host has "
            f"{'them all' if len(unit.labels) > 1 else 'it'} (hosts: {hosts})",
            origin,
            "add the label to a host's labels in the inventory, or change resources.host_labels",
        )
    among = _among(unit)
    if unit.spread and any(_fits(h, unit.labels, loads[h.name], size) for h in labelled):
        spread = program.group_index[unit.spread[0]]
        return Diagnostic(
            f"group '{spread.name}' sets resources.spread: each of its processes needs a host"
            f"{among} of its own, and every such host already runs one (hosts: {hosts})",
            spread.origin,
            "add hosts to the inventory, lower the group's count, or drop spread",
        )
    return Diagnostic(
        f"{_who(unit)} needs room for {size} {'more ' if size < len(unit.exes) else ''}"
        f"executable(s) on one host{among}, and none is left (hosts: {hosts})",
        origin,
        "raise a host's capacity or add hosts to the inventory",
    )


def _among(unit: _Unit) -> str:
    return f" labelled {', '.join(unit.labels)}" if unit.labels else ""


def _pinned(
    unit: _Unit, program: Program, host: HostSpec, load: int, size: int, up: bool
) -> Diagnostic:
    """Why host set ``unit``, running on ``host``, cannot take ``size`` more executables."""
    origin = program.group_index[unit.groups[0]].origin
    if not up:
        why = f"host {host.name} is lost"
    elif not set(unit.labels) <= set(host.labels):
        why = f"host {host.name} lacks the label(s) {', '.join(unit.labels)}"
    else:
        why = f"host {host.name} has no room left ({_show_host(host, load)})"
    return Diagnostic(
        f"{_who(unit)} runs on host {host.name} and would take {size} more executable(s) "
        f"there, but {why}",
        origin,
        "raise the host's capacity, or give the new nodes a colocation set of their own",
    )


def place(
    program: Program,
    inventory: Inventory,
    running: Mapping[str, str] | None = None,
    up: Collection[str] | None = None,
    leaving: Mapping[str, str] | None = None,
) -> Placement:
    """Place every executable of ``program`` on a host of ``inventory``; a ``TopoError``
    with one diagnostic per unit that fits nowhere. For a program changed while it runs:
    ``running`` (executable -> host) stay where they are and count there, the others go
    to hosts in ``up`` (default: all), and ``leaving`` (executables removed from the
    program that still run, -> host) are only remembered where they are."""
    running = running or {}
    units = _units(program)
    ranked = sorted(
        range(len(units)),
        key=lambda i: (-len(units[i].labels), -len(units[i].spread), -len(units[i].exes), i),
    )
    loads = {h.name: 0 for h in inventory.hosts}
    chosen: dict[str, str] = {}
    spread_on: dict[str, set[str]] = {}  # spread group -> hosts running one of its processes
    for unit in units:  # what runs stays where it is, and takes its room there
        for exe in unit.exes:
            if running.get(exe) in loads:
                chosen[exe] = running[exe]
                loads[chosen[exe]] += 1
                for group in unit.spread:
                    spread_on.setdefault(group, set()).add(chosen[exe])
    hosts = [h for h in inventory.hosts if up is None or h.name in up]
    devices = _Devices(program, inventory)
    for exe, where in chosen.items():
        devices.take(where, [exe])
    errors = []
    for i in ranked:
        unit = units[i]
        todo = [e for e in unit.exes if e not in chosen]
        if not todo:
            continue
        there = [chosen[e] for e in unit.exes if e in chosen]  # a host set that runs
        if there:
            host = inventory.host(max(set(there), key=there.count))
            live = up is None or host.name in up
            if not live or not _fits(host, unit.labels, loads[host.name], len(todo)):
                errors.append(_pinned(unit, program, host, loads[host.name], len(todo), live))
                continue
            if not devices.room(host.name, todo):
                errors.append(devices.short(unit, todo, [host]))
                continue
            best = host
        else:
            taken = set().union(*(spread_on.get(g, set()) for g in unit.spread))
            fitting = [
                h
                for h in hosts
                if h.name not in taken and _fits(h, unit.labels, loads[h.name], len(todo))
            ]
            if not fitting:
                errors.append(_unplaceable(unit, program, inventory, loads, len(todo), up))
                continue
            with_devices = [h for h in fitting if devices.room(h.name, todo)]
            if not with_devices:
                errors.append(devices.short(unit, todo, fitting))
                continue
            best = min(with_devices, key=lambda h: loads[h.name])
        devices.take(best.name, todo)
        loads[best.name] += len(todo)
        for group in unit.spread:
            spread_on.setdefault(group, set()).add(best.name)
        for exe in todo:
            chosen[exe] = best.name
    if errors:
        raise TopoError(errors)
    labels = {e: u.labels for u in units for e in u.exes}
    host_sets = {e: u.host_set for u in units for e in u.exes}
    spread = {e: u.spread for u in units for e in u.exes}
    assigned = {e.id: chosen[e.id] for e in program.executables}
    gone = {e: h for e, h in (leaving or {}).items() if e not in assigned}
    assigned.update(gone)
    return Placement(inventory.hosts, assigned, labels, host_sets, spread, gone)


class _Devices:
    """The accelerators left on each host as units are placed (how many of each kind:
    which ones is ``device_plan.assign``'s, once every unit has its host). The replicas
    of a group whose processes share devices take them once per host."""

    def __init__(self, program: Program, inventory: Inventory) -> None:
        self.program = program
        self.free = {h.name: dict(h.accelerators) for h in inventory.hosts}
        self.shared: dict[str, set[str]] = {h.name: set() for h in inventory.hosts}

    def _need(self, host: str, exes: Sequence[str]) -> dict[str, int]:
        need: dict[str, int] = {}
        shared = set(self.shared.get(host, ()))
        for exe in exes:
            group = group_asking(self.program, exe)
            if group is None:
                continue
            want = asked([group.resources])
            assert want is not None
            if want.kind == "auto":  # takes one where placement put it, if one is free
                continue
            if want.shared:
                if group.name in shared:
                    continue
                shared.add(group.name)
            need[want.kind] = need.get(want.kind, 0) + want.count
        return need

    def room(self, host: str, exes: Sequence[str]) -> bool:
        free = self.free.get(host, {})
        return all(free.get(k, 0) >= n for k, n in self._need(host, exes).items())

    def take(self, host: str, exes: Sequence[str]) -> None:
        for kind, n in self._need(host, exes).items():
            free = self.free.setdefault(host, {})
            free[kind] = free.get(kind, 0) - n
        for exe in exes:
            group = group_asking(self.program, exe)
            want = None if group is None else asked([group.resources])
            if group is not None and want is not None and want.shared:
                self.shared.setdefault(host, set()).add(group.name)

    def short(self, unit: _Unit, exes: Sequence[str], hosts: Sequence[HostSpec]) -> Diagnostic:
        """Why none of ``hosts`` (the ones its labels and room allow) has the devices."""
        asking = [g for g in (group_asking(self.program, e) for e in exes) if g is not None]
        origin = asking[0].origin if asking else None
        need = ", ".join(f"{n} {k}(s)" for k, n in self._need("", exes).items())
        left = "; ".join(
            f"{h.name} ({_left(h.accelerators, self.free.get(h.name, {}))})" for h in hosts
        )
        return Diagnostic(
            f"{_who(unit)} needs {need} on one host, and no host it may use has them free "
            f"(hosts: {left})",
            origin,
            "declare more in the inventory's accelerators, lower the group's count or "
            "resources.accelerators, or let its processes share them (shared: true)",
        )


def _left(offered: dict[str, int], free: dict[str, int]) -> str:
    if not offered:
        return "no accelerators"
    return ", ".join(f"{k} {max(free.get(k, 0), 0)} of {n} free" for k, n in offered.items())


def format_placement(placement: Placement, program: Program, inventory: Inventory) -> str:
    """Per host: name, address, labels, capacity, then its executables and their nodes."""
    where = f" ({inventory.path})" if inventory.path else ""
    lines = [f"placement on {len(inventory.hosts)} host(s){where}"]
    for host, exes in placement.as_dict().items():
        spec = inventory.host(host)
        labels = f"  labels {', '.join(spec.labels)}" if spec.labels else ""
        capacity = f"  capacity {spec.capacity}" if spec.capacity is not None else ""
        address = f"{spec.user}@{spec.address}" + (f":{spec.port}" if spec.port != 22 else "")
        count = f"{len(exes)} executable{'s' if len(exes) != 1 else ''}"
        lines.append(f"  host {host}  {address}{labels}{capacity}  — {count}")
        for exe in exes:
            nodes = program.executable_index[exe].nodes
            shown = exe if nodes == (exe,) else f"{exe}: {', '.join(nodes)}"
            lines.append(f"    {shown}")
    return "\n".join(lines)
