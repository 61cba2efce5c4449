"""What ``topo apply`` would do to a running program, and whether it can be done live.

:func:`plan_change` takes the running program and the new one (as compiled from a
file), arranges the new one's executables so that the running processes are kept where
the new packing allows (``topo.ir.packing.as_applied``), diffs the two
(``topo.ir.diff``) and turns the diff into actions on executables -- the unit a backend
starts and stops: the ones to start, to restart replica by replica with their new
definition, and to end. What cannot be changed on a running program is refused, with
the reason, before anything changes.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from topo.ir import FrozenMap, GroupRef, Program, Value
from topo.ir.diff import ProgramDiff, diff_programs
from topo.ir.packing import as_applied


@dataclass(frozen=True)
class ChangeAsk:
    """How a change was asked for (``topo apply``'s flags), passed whole from the request
    to the steps that carry it out."""

    dry_run: bool = False  # plan only
    max_unavailable: int = 1  # executables of a changed group restarted at a time
    source: dict[str, Any] = field(default_factory=dict)  # file and parameters, for the record
    keep_state: bool = True  # a restarted node starts from the state it had
    confirmed: bool = False  # a change that would stop the program or lose work may go on


@dataclass(frozen=True)
class LivePlan:
    """A change to a running program: the program as it will run, the diff, and the
    executables to ``start`` (new), ``restart`` (same id, new definition) and ``stop``
    (gone from the program), in start order; ``refused`` says why it cannot be applied
    live (empty: it can); ``confirm`` why it must be confirmed first (it would stop the
    program or lose work: ``topo.supervisor.hazards``)."""

    program: Program
    diff: ProgramDiff
    start: tuple[str, ...] = ()
    restart: tuple[str, ...] = ()
    stop: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    confirm: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Nothing to do: the programs are the same."""
        return self.diff.equal


def plan_change(running: Program, new: Program, backend_errors: Iterable[str] = ()) -> LivePlan:
    """The live plan from ``running`` to ``new`` (``backend_errors``: what the backend
    said it cannot honour, refusals too)."""
    target = as_applied(running, new)
    diff = diff_programs(running, target)
    old_exes, new_exes = running.executable_index, target.executable_index
    restarting = set(diff.restart)
    start = tuple(e.id for e in target.executables if e.id not in old_exes)
    stop = tuple(e.id for e in running.executables if e.id not in new_exes)
    restart = tuple(
        e.id
        for e in target.executables
        if e.id in old_exes and (e != old_exes[e.id] or restarting.intersection(e.nodes))
    )
    refused = [*_refusals(running, target, diff), *backend_errors]
    return LivePlan(target, diff, start, restart, stop, tuple(refused))


def _refusals(running: Program, new: Program, diff: ProgramDiff) -> list[str]:
    """Why ``running`` cannot become ``new`` while it runs."""
    out = []
    if running.name != new.name:
        out.append(
            f"the program's name changes ({running.name} → {new.name}): it is another "
            "program; start it as a run of its own"
        )
    if running.seed != new.seed:
        out.append(
            f"the program's seed changes ({running.seed} → {new.seed}), which changes every "
            "node's seed: stop the run and start it again (or keep the seed)"
        )
    for exe in diff.executables:
        was = running.executable_index.get(exe.executable)
        if exe.op == "~" and was is not None and was.mode == "set":
            now = new.executable_index[exe.executable]
            out.append(
                f"thread colocation set '{exe.executable}' would change in place "
                f"({', '.join(was.nodes)} → {', '.join(now.nodes)}): the threads of a "
                "running process cannot be moved in or out; give the new set another name"
            )
    return out


def group_table(
    programs: Iterable[Program], live: set[str]
) -> dict[str, tuple[tuple[str, str, float | None], ...]]:
    """Group -> its members that serve as such now (``live``), in the order of the last
    program that has them first: ``(node, kind, call timeout)`` each -- what the registry
    tells the nodes holding the group."""
    table: dict[str, dict[str, tuple[str, str, float | None]]] = {}
    for program in reversed(list(programs)):  # the newest program's order first
        for node in program.nodes:
            if node.id in live:
                entry = (node.id, program.kind_of(node.id), program.rpc_of(node.id).call_timeout_s)
                table.setdefault(node.group, {}).setdefault(node.id, entry)
    return {group: tuple(members.values()) for group, members in table.items()}


def holders(programs: Iterable[Program]) -> dict[str, frozenset[str]]:
    """Executable -> the groups its nodes hold whole (``"@group"`` arguments): who may ask
    the registry for whose members."""
    out: dict[str, set[str]] = {}
    for program in programs:
        for node in program.nodes:
            groups = set(_groups_in(node.args)) | set(_groups_in(node.posargs))
            if groups:
                out.setdefault(node.executable, set()).update(groups)
    return {exe: frozenset(groups) for exe, groups in out.items()}


def _groups_in(value: Value) -> Iterable[str]:
    if isinstance(value, GroupRef):
        yield value.group
    elif isinstance(value, tuple):
        for item in value:
            yield from _groups_in(item)
    elif isinstance(value, FrozenMap):
        for item in value.values():
            yield from _groups_in(item)
