"""Which accelerators of its host each executable gets, decided before anything starts.

A host offers accelerators by kind (``{"gpu": 2}``: devices 0 and 1): found on this
machine (``local_accelerators``), declared per host in an ssh inventory. An executable
asks through its groups' ``resources.accelerators`` (``topo.backends.devices.asked``):
a count of a kind, or devices by index. Each device goes to one executable unless the
group says its processes share (``shared``: the replicas of a group on one host get the
same devices). Executables are served in program order, the ones naming their devices
first; what cannot be served is one diagnostic each at the group, and nothing starts.
Pure but for ``local_accelerators``: no processes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

from topo.backends.devices import Assigned, asked
from topo.diagnostics import Diagnostic, TopoError
from topo.ir import Accelerators, Group, Program

ENV = "TOPO_ACCELERATORS"  # declares this machine's accelerators: "gpu:2", "tpu:1", "none"
KINDS = ("gpu", "tpu")
LOCAL = "this machine"  # the one host of procs (and its name in messages)


def parse_accelerators(text: str, where: str = ENV) -> dict[str, int]:
    """``"gpu:2,tpu:1"`` (or ``"none"``, or empty) as ``{"gpu": 2, "tpu": 1}``; a
    ``ValueError`` that says what was expected."""
    found: dict[str, int] = {}
    text = text.strip()
    if text in ("", "none"):
        return found
    for part in text.split(","):
        m = re.fullmatch(r"\s*(gpu|tpu)\s*:\s*(\d+)\s*", part)
        if m is None:
            raise ValueError(
                f"{where}={text!r}: expected KIND:COUNT pairs separated by commas, with KIND "
                f"one of {', '.join(KINDS)} (e.g. gpu:2), or none"
            )
        found[m[1]] = int(m[2])
    return found


def local_accelerators(dev: Path = Path("/dev")) -> dict[str, int]:
    """This machine's accelerators by kind: ``TOPO_ACCELERATORS`` where set (it wins:
    what a container hides or a driver names otherwise), else NVIDIA GPUs
    (``/dev/nvidia0``...) and TPU chips (``/dev/accel0``..., or ``/dev/vfio/0``... where
    the chips are passed through VFIO, as on TPU v5e hosts)."""
    declared = os.environ.get(ENV)
    if declared is not None:
        return parse_accelerators(declared)
    found: dict[str, int] = {}
    gpus = _numbered(dev, r"nvidia(\d+)")
    if gpus:
        found["gpu"] = gpus
    tpus = _numbered(dev, r"accel(\d+)") or _numbered(dev / "vfio", r"(\d+)")
    if tpus:
        found["tpu"] = tpus
    return found


def _numbered(folder: Path, pattern: str) -> int:
    try:
        names = [p.name for p in folder.iterdir()]
    except OSError:
        return 0
    return sum(1 for n in names if re.fullmatch(pattern, n))


def group_asking(program: Program, exe: str) -> Group | None:
    """The group whose ``resources`` an executable's accelerators come from."""
    for node in program.executable_index[exe].nodes:
        group = program.group_of(node)
        if asked([group.resources]) is not None:
            return group
    return None


def assign(
    program: Program,
    host_of: Mapping[str, str],
    offered: Mapping[str, Mapping[str, int]],
    kept: Mapping[str, Assigned] | None = None,
) -> dict[str, Assigned]:
    """Executable -> the devices it gets on its host (``host_of``; hosts' accelerators:
    ``offered``), for every executable that asks; ``kept``: the devices of executables
    already running (a changed program), which stay theirs. ``TopoError`` with one
    diagnostic per group that cannot be served."""
    kept = dict(kept or {})
    taken: dict[tuple[str, str], dict[int, str]] = {}  # (host, kind) -> device -> holder
    shares: dict[tuple[str, str], Assigned] = {}  # (host, shared group) -> its devices
    out: dict[str, Assigned] = {}
    asking = [e.id for e in program.executables if group_asking(program, e.id) is not None]
    for exe in asking:
        if exe in kept and exe in host_of:
            out[exe] = kept[exe]
            group = group_asking(program, exe)
            assert group is not None
            holder = group.name if _wants(program, exe).shared else exe
            _take(taken, host_of[exe], out[exe], holder, shares)
    errors: dict[str, Diagnostic] = {}
    # named devices first, then counts of a kind, then auto (it takes what is left)
    order = sorted(
        asking, key=lambda e: (_wants(program, e).ids is None, _wants(program, e).kind == "auto")
    )
    for exe in order:
        if exe in out or exe not in host_of:
            continue
        group = group_asking(program, exe)
        assert group is not None
        want = _wants(program, exe)
        host = host_of[exe]
        share = shares.get((host, group.name)) if want.shared else None
        if share is not None:
            out[exe] = share
            continue
        held = {kind: taken.get((host, kind), {}) for kind in KINDS}
        problem, got = _serve(want, host, offered.get(host, {}), held)
        if problem is not None:
            errors.setdefault(group.name, _diagnostic(group, want, host, problem))
            continue
        if got is None:  # auto, and none free: on the CPU
            continue
        out[exe] = got
        _take(taken, host, got, group.name if want.shared else exe, shares)
    if errors:
        raise TopoError(list(errors.values()))
    return out


def _wants(program: Program, exe: str) -> Accelerators:
    group = group_asking(program, exe)
    assert group is not None
    found = asked([group.resources])
    assert found is not None
    return found


def _take(
    taken: dict[tuple[str, str], dict[int, str]],
    host: str,
    got: Assigned,
    holder: str,
    shares: dict[tuple[str, str], Assigned],
) -> None:
    for i in got.ids:
        taken.setdefault((host, got.kind), {})[i] = holder
    shares[(host, holder)] = got


def _serve(
    want: Accelerators,
    host: str,
    offered: Mapping[str, int],
    held: Mapping[str, Mapping[int, str]],
) -> tuple[str | None, Assigned | None]:
    """(why it cannot be served, None) or (None, the devices it gets: None for ``auto``
    where the host has none free -- it runs on the CPU)."""
    if want.kind == "auto":
        for kind in KINDS:
            free = [i for i in range(offered.get(kind, 0)) if i not in held[kind]]
            if len(free) >= want.count:
                return None, Assigned(kind, tuple(free[: want.count]))
        return None, None
    taken = held[want.kind]
    have = offered.get(want.kind, 0)
    if have == 0:
        kinds = ", ".join(f"{k} ×{n}" for k, n in offered.items() if n) or "none"
        return f"{_host(host)} has no {want.kind} (its accelerators: {kinds})", None
    if want.ids is not None:
        out_of_range = [i for i in want.ids if i >= have]
        if out_of_range:
            return (
                f"{want.kind} {','.join(map(str, out_of_range))} is out of range on "
                f"{_host(host)}: it has {have} ({want.kind} 0-{have - 1})"
            ), None
        busy = [i for i in want.ids if i in taken]
        if busy:
            i = busy[0]
            return f"{want.kind} {i} of {_host(host)} is already {taken[i]}'s", None
        return None, Assigned(want.kind, tuple(want.ids))
    if want.count > have:
        return f"{_host(host)} has {have} {want.kind}(s), fewer than the {want.count} asked", None
    free = [i for i in range(have) if i not in taken]
    if len(free) < want.count:
        holders = ", ".join(sorted(set(taken.values())))
        return (
            f"the {have} {want.kind}(s) of {_host(host)} are taken (by {holders}); "
            f"{want.count} more are asked"
        ), None
    return None, Assigned(want.kind, tuple(free[: want.count]))


def _host(host: str) -> str:
    return host if host == LOCAL else f"host {host}"


def _diagnostic(group: Group, want: Accelerators, host: str, problem: str) -> Diagnostic:
    ask = (
        f"{want.kind} {','.join(map(str, want.ids))}"
        if want.ids is not None
        else f"{want.count} {want.kind}(s) per process"
    )
    return Diagnostic(
        f"group '{group.name}' asks for {ask}: {problem}",
        group.origin,
        "lower resources.accelerators, let the group's processes share them "
        "(resources.accelerators.shared), or run where there are more"
        if "taken" in problem or "fewer" in problem
        else f"declare the host's accelerators (ssh: the inventory's accelerators; this "
        f"machine: {ENV}=KIND:COUNT) or change resources.accelerators",
    )


def format_assignment(program: Program, assigned: Mapping[str, Assigned]) -> str:
    """``accelerators`` then, per executable that has some, its devices (for topo plan)."""
    if not assigned:
        return ""
    lines = ["accelerators"]
    for exe in program.executables:
        got = assigned.get(exe.id)
        if got is not None:
            nodes = ", ".join(exe.nodes)
            shown = exe.id if exe.nodes == (exe.id,) else f"{exe.id}: {nodes}"
            lines.append(f"  {shown} → {got}")
    return "\n".join(lines)


def on_this_machine(
    program: Program, kept: Mapping[str, Assigned] | None = None
) -> dict[str, Assigned]:
    """``assign`` for a backend whose executables all run on this machine (procs)."""
    host_of = {e.id: LOCAL for e in program.executables}
    return assign(program, host_of, {LOCAL: local_accelerators()}, kept)


def init_ids(assigned: Mapping[str, Assigned]) -> dict[str, str]:
    """What an agent or fork server is told: executable -> its devices (``gpu:0,1``)."""
    return {exe: f"{got.kind}:{','.join(map(str, got.ids))}" for exe, got in assigned.items()}


def parse_assigned(text: str | None) -> Assigned | None:
    """``init_ids``'s ``gpu:0,1`` as an ``Assigned`` (None: none)."""
    if not text:
        return None
    kind, _, ids = text.partition(":")
    return Assigned(kind, tuple(int(i) for i in ids.split(",") if i))


def in_step(ids: Mapping[str, str], visible: str | None) -> dict[str, str]:
    """``init_ids``' GPUs given out as positions 0..n-1 among those a Slurm step sees,
    as the ids it sees them by: the positions' entries of its ``visible``
    (``CUDA_VISIBLE_DEVICES``: "1,2" in a job that holds a node's GPUs 1 and 2 and does
    not confine devices, "0,1" where it does). Unchanged where it sees none named."""
    seen = [v.strip() for v in (visible or "").split(",") if v.strip()]
    if not seen:
        return dict(ids)
    out = {}
    for exe, text in ids.items():
        got = parse_assigned(text)
        if got is None or got.kind != "gpu" or any(i >= len(seen) for i in got.ids):
            out[exe] = text
        else:
            out[exe] = f"gpu:{','.join(seen[i] for i in got.ids)}"
    return out


class MachineDevices:
    """This machine's accelerators given out to a program's executables, kept across
    changes to it (the procs backend's: ``check``, ``check_update``, ``take_update``)."""

    def __init__(self) -> None:
        self.assigned: dict[str, Assigned] = {}
        self._next: dict[str, Assigned] | None = None  # a change's, checked

    def check(self, program: Program) -> list[Diagnostic]:
        """Give out the devices ``program`` asks for; what cannot be served."""
        try:
            self.assigned = on_this_machine(program)
        except TopoError as error:
            return list(error.diagnostics)
        return []

    def check_update(self, program: Program) -> list[Diagnostic]:
        """The same for a changed program, the running executables keeping theirs
        (held for ``take_update``, which follows a change that passed)."""
        kept = {e: a for e, a in self.assigned.items() if e in program.executable_index}
        try:
            self._next = on_this_machine(program, kept)
        except TopoError as error:
            return list(error.diagnostics)
        return []

    def take_update(self) -> dict[str, str]:
        """The checked change's devices are the program's now; ``init_ids`` of them."""
        if self._next is not None:
            self.assigned, self._next = self._next, None
        return init_ids(self.assigned)
