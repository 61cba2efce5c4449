"""What each executable asks of a Ray node, and whether the cluster can give it.

An executable's demand is one bundle of Ray resources: CPUs (``resources.cpus``
gives the count; else a small fraction, so a thousand executables fit on one core),
GPUs (``resources.gpus``), and one custom resource per ``host_labels`` label (a node
started with ``--resources='{"gpu": 1}'`` carries label ``gpu``). A host-colocation set
(``Executable.placement``) becomes one STRICT_PACK placement group, a bundle per
executable; a group with ``resources.spread`` one STRICT_SPREAD placement group (each
process on its own node); the rest are balanced by Ray. An executable that asks for GPUs
runs in a Ray actor of its own (``own_actor``: Ray assigns devices to its workers only),
the others are forked by their node's topo agent. Ray never fails an infeasible request
(it waits for a node that may never come), so ``infeasible`` checks the demands against
the live nodes before anything starts. Pure: no Ray calls here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from topo.backends.devices import asked
from topo.diagnostics import Diagnostic
from topo.ir import Program

DEFAULT_CPUS = 0.001  # a topo executable mostly waits on RPC; Ray's unit is one core
LABEL_AMOUNT = 0.001  # of a label's custom resource, so any number of executables share it

Bundle = dict[str, float]
_BUILTIN = ("CPU", "GPU", "TPU", "memory", "object_store_memory")
_BUILTIN_PREFIXES = ("node:", "accelerator_type:")


@dataclass(frozen=True)
class Unit:
    """Executables placed together: a host-colocation set (one Ray node), a spread group
    (one Ray node each), or a single executable."""

    exes: tuple[str, ...]
    groups: tuple[str, ...]
    host_set: str | None
    spread: str | None = None  # the spread group whose processes these are

    @property
    def strategy(self) -> str | None:
        """The Ray placement-group strategy of this unit (None: no placement group)."""
        if self.host_set is not None:
            return "STRICT_PACK"
        return "STRICT_SPREAD" if self.spread is not None else None

    @property
    def name(self) -> str:
        return self.host_set or self.spread or self.exes[0]


def demand(program: Program, exe_id: str) -> Bundle:
    """The Ray resources one executable asks for (the most any of its groups asks).
    Accelerators are Ray's ``GPU`` and ``TPU``; the replicas of a group that shares its
    devices ask for a fraction each (Ray packs them onto the same ones)."""
    cpus = 0.0
    devices: dict[str, float] = {}
    labels: set[str] = set()
    for node in program.executable_index[exe_id].nodes:
        group = program.group_of(node)
        res = group.resources
        cpus = max(cpus, float(len(res.cpus)) if res.cpus else DEFAULT_CPUS)
        want = asked([res])
        if want is not None and want.kind in RAY_KIND:  # (auto: Ray is asked for none)
            amount = want.count / max(group.count, 1) if want.shared else float(want.count)
            key = RAY_KIND[want.kind]
            devices[key] = max(devices.get(key, 0.0), amount)
        labels.update(res.host_labels)
    bundle: Bundle = {"CPU": cpus, **devices}
    bundle.update(dict.fromkeys(sorted(labels), LABEL_AMOUNT))
    return bundle


RAY_KIND = {"gpu": "GPU", "tpu": "TPU"}  # an accelerator kind: Ray's resource


def own_actor(program: Program, exe_id: str) -> bool:
    """Whether ``exe_id`` runs in a Ray actor of its own: it asks for accelerators, and
    Ray assigns devices (``CUDA_VISIBLE_DEVICES``, the TPU chips) only to its own
    workers."""
    need = demand(program, exe_id)
    return any(need.get(k, 0.0) > 0 for k in RAY_KIND.values())


def threads(program: Program) -> dict[str, int]:
    """Executable -> the threads its native libraries may use (``OMP_NUM_THREADS``, as Ray
    sets it for an actor: its whole CPUs), for those with more than one."""
    out = {}
    for exe in program.executables:
        n = int(demand(program, exe.id)["CPU"])
        if n > 1:
            out[exe.id] = n
    return out


def memory_unenforced(program: Program) -> list[Diagnostic]:
    """A warning per enabled group with a ``resources.memory`` limit whose processes run
    in Ray actors of their own (GPUs): Ray's worker is not topo's to kill. Forked ones
    are held to it as on procs."""
    return [
        Diagnostic(
            f"group {g.name!r} sets resources.memory and asks for GPUs: its processes run "
            "in Ray actors of their own, which topo cannot end over a limit (Ray's memory "
            "is a scheduling hint); it runs without the limit",
            g.origin,
            severity="warning",
            hint="run it with --backend procs (or ssh) to have the limit enforced",
        )
        for g in program.groups
        if g.enabled and g.resources.memory is not None and g.resources.gpus
    ]


def _spread_group(program: Program, exe_id: str) -> str | None:
    for node in program.executable_index[exe_id].nodes:
        group = program.group_of(node)
        if group.resources.spread:
            return group.name
    return None


def units(program: Program) -> list[Unit]:
    """The program's executables gathered by host-colocation set and by spread group
    (the compiler refuses a node in both), in program order."""
    members: dict[tuple[str, str], list[str]] = {}
    order: list[tuple[str, str]] = []
    for exe in program.executables:
        spread = _spread_group(program, exe.id)
        if exe.placement is not None:
            key = ("host", exe.placement)
        elif spread is not None:
            key = ("spread", spread)
        else:
            key = ("one", exe.id)
        if key not in members:
            order.append(key)
        members.setdefault(key, []).append(exe.id)
    out = []
    for kind, name in order:
        exes = tuple(members[(kind, name)])
        groups = tuple(
            dict.fromkeys(
                program.node(n).group for e in exes for n in program.executable_index[e].nodes
            )
        )
        out.append(
            Unit(
                exes,
                groups,
                name if kind == "host" else None,
                name if kind == "spread" else None,
            )
        )
    return out


def total(bundles: Sequence[Mapping[str, float]]) -> Bundle:
    """The sum of ``bundles`` (what a STRICT_PACK group needs of one node)."""
    out: Bundle = {}
    for bundle in bundles:
        for key, amount in bundle.items():
            out[key] = out.get(key, 0.0) + amount
    return out


def fits(need: Mapping[str, float], node: Mapping[str, float]) -> bool:
    """Whether a node with total resources ``node`` can ever hold ``need``."""
    return all(node.get(key, 0.0) + 1e-9 >= amount for key, amount in need.items())


def describe(need: Mapping[str, float]) -> str:
    """A demand for people: ``0.001 CPU, 1 GPU, label 'gpu'``."""
    parts = []
    for key, amount in need.items():
        if key == "CPU":
            parts.append(f"{amount:g} CPU")
        elif key == "GPU":
            parts.append(f"{amount:g} GPU")
        else:
            parts.append(f"label {key!r}")
    return ", ".join(parts)


def _unit(key: str) -> str:
    return key if key in ("CPU", "GPU", "TPU") else f"of label {key!r}"


def _offered(nodes: Sequence[Mapping[str, float]]) -> str:
    labels = sorted(
        {k for n in nodes for k in n if k not in _BUILTIN and not k.startswith(_BUILTIN_PREFIXES)}
    )
    cpus = max((n.get("CPU", 0.0) for n in nodes), default=0.0)
    gpus = max((n.get("GPU", 0.0) for n in nodes), default=0.0)
    return (
        f"{len(nodes)} node(s); at most {cpus:g} CPU and {gpus:g} GPU on one node; "
        f"custom resources: {', '.join(labels) or 'none'}"
    )


def infeasible(program: Program, nodes: Sequence[Mapping[str, float]]) -> list[Diagnostic]:
    """One error per unit that no live Ray node (total resources ``nodes``) can hold,
    naming its groups (at their ``file:line:col``)."""
    out = []
    for unit in units(program):
        if unit.spread is not None:
            out.extend(_spread_infeasible(program, unit, nodes))
            continue
        need = total([demand(program, e) for e in unit.exes])
        if any(fits(need, node) for node in nodes):
            continue
        group = program.group_index[unit.groups[0]]
        names = ", ".join(repr(g) for g in unit.groups)
        if unit.host_set is not None:
            what = f"host-colocation set {unit.host_set!r} (groups {names}) must share one node"
        else:
            what = f"group {names}"
        out.append(
            Diagnostic(
                f"{what}: no node of the Ray cluster offers {describe(need)}",
                group.origin,
                hint=f"the cluster has {_offered(nodes)}; a host label is a custom resource "
                "(ray start --resources='{\"LABEL\": 1}')",
            )
        )
    return out or _over_total(program, nodes)


def _over_total(program: Program, nodes: Sequence[Mapping[str, float]]) -> list[Diagnostic]:
    """An error when every executable fits somewhere but not all of them at once."""
    need = total([demand(program, e.id) for e in program.executables])
    have = total(nodes)
    short = {k: v for k, v in need.items() if have.get(k, 0.0) + 1e-9 < v}
    if not short:
        return []
    asked = ", ".join(f"{v:g} {_unit(k)}" for k, v in short.items())
    offered = ", ".join(f"{have.get(k, 0.0):g}" for k in short)
    return [
        Diagnostic(
            f"the program's {len(program.executables)} processes ask Ray for {asked} in "
            f"all, and the cluster's live nodes have {offered}",
            hint="ask for fewer resources.cpus/gpus, or add nodes (an executable that "
            f"gives no cpus asks for {DEFAULT_CPUS:g} CPU)",
        )
    ]


def _spread_infeasible(
    program: Program, unit: Unit, nodes: Sequence[Mapping[str, float]]
) -> list[Diagnostic]:
    """A spread group needs as many nodes as it has processes, each able to hold one."""
    bundles = [demand(program, e) for e in unit.exes]
    need = {k: max(b.get(k, 0.0) for b in bundles) for b in bundles for k in b}
    able = sum(1 for node in nodes if fits(need, node))
    if able >= len(bundles):
        return []
    assert unit.spread is not None
    group = program.group_index[unit.spread]
    return [
        Diagnostic(
            f"group {unit.spread!r} sets resources.spread: its {len(bundles)} processes need "
            f"{len(bundles)} Ray nodes that offer {describe(need)}, and the cluster has "
            f"{able}",
            group.origin,
            hint=f"the cluster has {_offered(nodes)}; add nodes, lower the group's count, "
            "or drop spread",
        )
    ]


def format_ray_placement(program: Program) -> str:
    """What ``topo run -b ray`` asks of Ray: per unit its placement strategy and each
    executable's resources (``topo plan -b ray``; no cluster is contacted)."""
    lines = [
        f"ray placement of {len(program.executables)} executable(s), forked by a topo "
        "agent on each Ray node they are placed on"
    ]
    last = ""
    for unit in units(program):
        if unit.strategy is None:
            head = "  SPREAD placement group (Ray balances these over the nodes)"
        elif unit.host_set is not None:
            head = f"  STRICT_PACK placement group '{unit.host_set}' (one node)"
        else:
            head = f"  STRICT_SPREAD placement group '{unit.spread}' (a node per process)"
        if head != last:
            lines.append(head)
        last = head
        for exe in unit.exes:
            nodes = program.executable_index[exe].nodes
            shown = exe if nodes == (exe,) else f"{exe}: {', '.join(nodes)}"
            own = (
                "  (a Ray actor of its own: Ray assigns its GPUs)"
                if own_actor(program, exe)
                else ""
            )
            lines.append(f"    {shown}  [{describe(demand(program, exe))}]{own}")
    return "\n".join(lines)
