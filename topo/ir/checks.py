"""Whole-graph checks on the IR alone (primaries, what thread colocation allows), for every
front end.

A check returns :class:`Problem` objects keyed by what they are about -- a group and its
setting, a colocation request, an executable, a node -- never by where that was written:
the YAML compiler turns them into file:line:col through its source map, the Launchpad
translator into the file and line of the ``add_node`` call that made the node.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from topo.ir.program import Executable, Group, Program

__all__ = ["Problem", "check_graph", "check_primaries", "check_program", "check_thread_sets"]


@dataclass(frozen=True, slots=True)
class Problem:
    """A graph error, keyed by what it is about (the most precise key a front end can place:
    ``node``, then ``colocation``, then ``executable``, then ``group``)."""

    message: str
    hint: str | None = None
    group: str = ""  # the group at fault ("" if none)
    setting: tuple[str | int, ...] = ()  # the setting at fault, under the group or colocation
    executable: str = ""  # the executable at fault
    colocation: int | None = None  # the index of the colocation request at fault
    node: str = ""  # the node at fault


def check_primaries(groups: Sequence[Group]) -> tuple[list[Problem], dict[str, list[Group]]]:
    """Each enabled secondary's primary exists, is enabled, a single node and not itself a
    secondary; the problems, and primary -> the groups that follow it."""
    problems: list[Problem] = []
    by_name = {g.name: g for g in groups}
    secondaries: dict[str, list[Group]] = {}
    for g in groups:
        if g.primary is None or not g.enabled:
            continue
        found = _primary_problem(g, by_name.get(g.primary))
        if found is not None:
            problems.append(Problem(*found, group=g.name, setting=("primary",)))
        else:
            secondaries.setdefault(g.primary, []).append(g)
    return problems, secondaries


def _primary_problem(g: Group, p: Group | None) -> tuple[str, str | None] | None:
    """What is wrong with ``p`` as the primary of ``g`` (message, hint), if anything."""
    if p is None:
        return f"group '{g.name}': primary '@{g.primary}' does not exist", None
    if p.name == g.name:
        return f"group '{g.name}' cannot be its own primary", None
    if not p.enabled:
        return f"group '{g.name}': its primary '{p.name}' is disabled", None
    if not p.singleton:
        return (
            f"group '{g.name}': primary '{p.name}' must be a single node (no count)",
            "secondaries follow exactly one primary, as Acme's secondary learners do",
        )
    if p.primary is not None:
        return (
            f"group '{g.name}': primary '{p.name}' is itself a secondary of '{p.primary}'",
            f"point '{g.name}' at '{p.primary}' directly",
        )
    return None


def check_thread_sets(
    groups: Sequence[Group],
    executables: Iterable[Executable],
    secondaries: dict[str, list[Group]],
) -> list[Problem]:
    """A thread set holds no primary that has secondary nodes (unless alone), and its groups
    share one restart policy (they restart together)."""
    problems: list[Problem] = []
    by_name = {g.name: g for g in groups}
    for exe in executables:
        if exe.mode != "set":
            continue
        members = {n.split("/")[0] for n in exe.nodes}
        for name in sorted(members):
            followers = [s for s in secondaries.get(name, []) if s.count > 0]
            if followers and len(members) > 1:
                others = ", ".join(sorted(members - {name}))
                n = sum(s.count for s in followers)
                problems.append(
                    Problem(
                        f"'{name}' is thread-colocated with {others} in '{exe.id}', but it has "
                        f"{n} secondary node(s) in {', '.join(s.name for s in followers)}; "
                        "colocating the learner with replay is only possible with a single learner",
                        "set the secondary count to 0 (e.g. -p num_learners=1) "
                        "or remove the colocation",
                        group=name,
                        executable=exe.id,
                    )
                )
        policies = {by_name[m].restart for m in members}
        if len(policies) > 1:
            problems.append(
                Problem(
                    f"the groups in '{exe.id}' ({', '.join(sorted(members))}) have different "
                    "restart policies, but they share one process and restart together",
                    "give them the same restart: settings",
                    executable=exe.id,
                )
            )
    return problems


def check_graph(groups: Sequence[Group], executables: Iterable[Executable]) -> list[Problem]:
    """Checks that need every group and executable at once: primaries, then thread sets."""
    problems, secondaries = check_primaries(groups)
    return problems + check_thread_sets(groups, executables, secondaries)


def check_program(program: Program) -> list[Problem]:
    """:func:`check_graph` of a whole program."""
    return check_graph(program.groups, program.executables)
