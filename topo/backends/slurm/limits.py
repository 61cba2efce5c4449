"""Why a partition cannot hold a job, in one diagnostic each: Slurm's limit by its name
(``MaxNodes``, ``MaxTime``, ``MaxCPUsPerNode``, ``MaxMemPerNode``, a node's
``RealMemory`` or ``Gres``) and the position of the group that asks for it. Pure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from topo.backends.slurm.demand import Component, Unit, holds, room
from topo.backends.slurm.options import SlurmOptions
from topo.backends.slurm.partition import Partition, show_time, time_s
from topo.diagnostics import Diagnostic, SourcePos
from topo.ir import Program


def _origin(program: Program, groups: Sequence[str], wanted: str = "") -> SourcePos | None:
    """The position of the first of ``groups`` that sets ``resources.<wanted>``."""
    for name in groups:
        group = program.group_index[name]
        if not wanted or getattr(group.resources, wanted):
            return group.origin
    return program.group_index[groups[0]].origin if groups else None


def _many(count: int, what: str) -> str:
    """``1 GPU``, ``2 GPUs``."""
    return f"{count} {what}{'s' if count != 1 else ''}"


def _who(unit: Unit) -> str:
    """The unit as a sentence's subject: group 'a', host set 'core' (groups 'a', 'b')."""
    groups = ("groups " if len(unit.groups) > 1 else "group ") + ", ".join(
        f"'{g}'" for g in unit.groups
    )
    if unit.host_set is not None and len(unit.exes) > 1:
        return f"host set '{unit.host_set}' ({groups})"
    if len(unit.groups) > 1:
        return f"executable '{unit.exes[0]}' ({groups})"
    return f"a process of {groups}"


def too_big(program: Program, unit: Unit, part: Partition) -> Diagnostic:
    """Why no node of ``part`` holds ``unit``: each of its asks over the partition's most."""
    want = unit.demand
    rooms = [(n, room(n, part)) for n in part.nodes]
    where = f"partition '{part.name}'"
    if not rooms:
        return Diagnostic(
            f"{where} has no nodes",
            _origin(program, unit.groups),
            "sinfo shows the partitions and their nodes",
        )
    said: list[str] = []
    wanted = ""
    top_cpus = max(rooms, key=lambda r: r[1].cpus)
    if want.cpus > top_cpus[1].cpus:
        cap = part.max_cpus_per_node
        limit = (
            f"MaxCPUsPerNode={cap}"
            if cap is not None and cap < top_cpus[0].cpus
            else f"the most: {top_cpus[0].cpus} on {top_cpus[0].name}"
        )
        said.append(
            f"{_many(want.cpus, 'CPU')} on one node, and {where} gives at most "
            f"{top_cpus[1].cpus} ({limit})"
        )
        wanted = wanted or "cpus"
    top_gpus = max(rooms, key=lambda r: r[1].gpus)
    if want.gpus > top_gpus[1].gpus:
        have = (
            f"at most {top_gpus[1].gpus} on a node "
            f"({top_gpus[0].name}: Gres=gpu:{top_gpus[0].gpus})"
            if top_gpus[1].gpus
            else "no node with GPUs (no Gres=gpu)"
        )
        said.append(f"{_many(want.gpus, 'GPU')} on one node, and {where} has {have}")
        wanted = wanted or "gpus"
    top_mem = max(rooms, key=lambda r: r[1].memory_mib)
    if want.memory_mib > top_mem[1].memory_mib:
        cap_mem = part.max_mem_per_node_mib
        limit = (
            f"MaxMemPerNode={cap_mem}M"
            if cap_mem is not None and cap_mem < top_mem[0].memory_mib
            else f"the most: RealMemory={top_mem[0].memory_mib}M on {top_mem[0].name}"
        )
        said.append(
            f"{want.memory_mib} MiB of memory on one node, and {where} gives at most "
            f"{top_mem[1].memory_mib} MiB ({limit})"
        )
        wanted = wanted or "memory"
    missing = want.labels - set().union(*(r.labels for _, r in rooms))
    if missing:
        said.append(
            f"a node with the feature(s) {', '.join(sorted(missing))}, and no node of {where} "
            "has them"
        )
        wanted = wanted or "host_labels"
    if not said:  # each ask fits some node, but no one node holds them all
        said.append(
            f"{want.cpus} CPUs, {want.gpus} GPUs, {want.memory_mib} MiB and features "
            f"{', '.join(sorted(want.labels)) or 'none'} on one node, and no node of {where} "
            "has them all"
        )
    return Diagnostic(
        f"{_who(unit)} needs " + "; and ".join(said),
        _origin(program, unit.groups, wanted),
        "ask for less (resources of the group), or submit to another partition (--partition)",
    )


def count_problems(
    program: Program, units: Sequence[Unit], components: Sequence[Component], part: Partition
) -> list[Diagnostic]:
    """The job's node count over the partition's (MaxNodes, its nodes), per component
    and in all."""
    total = sum(c.nodes for c in components)
    widest = max(
        (u for u in units if u.spread is not None),
        key=lambda u: sum(1 for v in units if v.spread == u.spread),
        default=None,
    )
    pos = None
    if widest is not None:
        pos = _origin(program, widest.groups, "spread")
    elif units:  # the group with the most processes
        sizes = Counter(g for u in units for g in u.groups)
        pos = program.group_index[max(sizes, key=lambda g: sizes[g])].origin
    why = (
        f"group '{widest.spread}' sets resources.spread"
        if widest is not None
        else "to hold its processes' CPUs, GPUs and memory"
    )
    where = f"partition '{part.name}'"
    errors = []
    if widest is None:  # processes over the partition's CPUs say more than a node count
        errors = cpu_problems(units, part, pos)
        if errors:
            return errors
    if part.max_nodes is not None and total > part.max_nodes:
        errors.append(
            Diagnostic(
                f"the job needs {total} nodes ({why}), and {where} allows at most "
                f"{part.max_nodes} (MaxNodes={part.max_nodes})",
                pos,
                "colocate more (colocate.per_process, resources), or submit to another "
                "partition (--partition)",
            )
        )
        return errors
    if total > len(part.nodes):
        errors.append(
            Diagnostic(
                f"the job needs {total} nodes ({why}), and {where} has {len(part.nodes)} "
                f"({', '.join(n.name for n in part.nodes) or 'none'})",
                pos,
                "colocate more (colocate.per_process, resources), or submit to another "
                "partition (--partition)",
            )
        )
        return errors
    errors = cpu_problems(units, part, pos)
    if errors:
        return errors
    # components never share a node: the biggest asks take the smallest nodes that hold them
    taken: set[str] = set()
    ranked = sorted(components, key=lambda c: (-c.gpus, -len(c.labels), -c.cpus, -c.memory_mib))
    for comp in ranked:
        holding = [n for n in part.nodes if holds(room(n, part), comp.demand)]
        free = sorted(
            (n for n in holding if n.name not in taken),
            key=lambda n: (n.gpus, n.cpus, n.memory_mib),
        )
        if len(free) < comp.nodes:
            others = (
                f", {len(holding) - len(free)} of them for the job's other nodes"
                if taken and len(holding) > len(free)
                else ""
            )
            errors.append(
                Diagnostic(
                    f"the job needs {comp.nodes} node{'s' if comp.nodes != 1 else ''} with "
                    f"{shape(comp)} each, and {where} has {len(holding)} "
                    f"({', '.join(n.name for n in holding) or 'none'}{others})",
                    pos,
                    "ask for less (resources of the groups), or submit to another partition "
                    "(--partition)",
                )
            )
            break
        taken.update(n.name for n in free[: comp.nodes])
    return errors


def cpu_problems(units: Sequence[Unit], part: Partition, pos: SourcePos | None) -> list[Diagnostic]:
    """The job's CPUs in all over the partition's."""
    cpus = sum(u.demand.cpus for u in units)
    where = f"partition '{part.name}'"
    total = sum(room(n, part).cpus for n in part.nodes)
    if cpus > total:
        each = ", ".join(f"{n.name}: {room(n, part).cpus}" for n in part.nodes)
        return [
            Diagnostic(
                f"the job's {sum(len(u.exes) for u in units)} processes ask for {cpus} CPUs in "
                f"all (one each without resources.cpus), and {where} has {total} ({each})",
                pos,
                "colocate more (colocate.per_process: threads of one process), or submit to "
                "another partition (--partition)",
            )
        ]
    return []


def shape(comp: Component) -> str:
    """A component's ask in words: 4 CPUs, 1 GPU, 2048 MiB, features a, b."""
    said = [f"{comp.cpus} CPU{'s' if comp.cpus != 1 else ''}"]
    if comp.gpus:
        said.append(f"{comp.gpus} GPU{'s' if comp.gpus != 1 else ''}")
    if comp.memory_mib:
        said.append(f"{comp.memory_mib} MiB")
    if comp.labels:
        said.append(f"features {', '.join(comp.labels)}")
    return ", ".join(said)


def time_problems(part: Partition, options: SlurmOptions) -> list[Diagnostic]:
    """``--time`` unreadable or over the partition's MaxTime; the warning not before the
    end."""
    limit: int | None = part.max_time_s
    source = f"partition '{part.name}''s MaxTime"
    if options.time is not None:
        source = f"--time {options.time}"
        try:
            limit = time_s(options.time)
        except ValueError:
            return [
                Diagnostic(
                    f"--time {options.time}: not a Slurm time limit",
                    None,
                    "MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS, DAYS-HOURS, "
                    "DAYS-HOURS:MINUTES or DAYS-HOURS:MINUTES:SECONDS",
                )
            ]
        if part.max_time_s is not None and (limit is None or limit > part.max_time_s):
            return [
                Diagnostic(
                    f"--time {options.time} ({show_time(limit)}) is over partition "
                    f"'{part.name}''s MaxTime={show_time(part.max_time_s)}",
                    None,
                    "ask for less time, or submit to another partition (--partition)",
                )
            ]
    if limit is not None and options.warning_s >= limit:
        return [
            Diagnostic(
                f"--warning-s {options.warning_s}: the warning must come before the job's "
                f"end, and its time limit is {show_time(limit)} ({source})",
                None,
                "give a shorter --warning-s, or a longer --time",
            )
        ]
    return []
