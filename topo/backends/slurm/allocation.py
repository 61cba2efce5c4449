"""The Slurm allocation a run lives in: the job (``SLURM_JOB_ID``), its nodes and their
addresses and features, read with ``scontrol`` -- and, where there is none, why, in
words a user of ``sbatch`` acts on. A heterogeneous job is read whole: ``scontrol show
job -o`` prints one line per component (``HetJobOffset``), and every node knows its
component (a step there needs ``srun --het-group=N``; ``SLURM_JOB_NODELIST`` lists only
component 0's nodes).

The Slurm commands are run as processes (``SLURM_CONF`` and the
rest of the environment as the caller's).
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from topo.backends.slurm.partition import gpus_in

COMMAND_S = 60.0  # a Slurm command answers within this (a busy controller takes seconds)


class NoAllocation(RuntimeError):
    """The run cannot live in a Slurm allocation here; the message says why and what to do."""


@dataclass(frozen=True)
class SlurmNode:
    """One node of the allocation: its Slurm name, the address nodes bind and dial on
    it, and its features (the labels ``resources.host_labels`` matches)."""

    name: str
    address: str
    features: tuple[str, ...] = ()
    component: int = 0  # its component of a heterogeneous job (0 in any other)
    cpus: int | None = None  # the CPUs the job holds on it (None: not known)
    gpus: tuple[int, ...] = ()  # the node's GPUs the job holds (their indexes there)


@dataclass(frozen=True)
class Allocation:
    """A running job and its nodes (in Slurm's order); ``here``: the node this process
    runs on, when it runs on one of them (an ``sbatch`` script does; ``salloc``'s shell
    on a login node does not)."""

    job: str
    nodes: tuple[SlurmNode, ...]
    here: str | None = None
    partition: str | None = None  # the partition of its (first) component

    @property
    def heterogeneous(self) -> bool:
        """Whether the job has several components (each a ``--het-group``)."""
        return any(n.component for n in self.nodes)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    def node(self, name: str) -> SlurmNode:
        """The node called ``name`` (KeyError if the job does not have it)."""
        for n in self.nodes:
            if n.name == name:
                return n
        raise KeyError(name)


def slurm(*args: str, env: Mapping[str, str] | None = None) -> str:
    """The output of a Slurm command; ``NoAllocation`` with Slurm's own words when it fails."""
    if shutil.which(args[0]) is None:
        raise NoAllocation(
            f"Slurm's commands are not installed on this machine ({args[0]} not found): "
            "run topo -b slurm on a node of a Slurm cluster"
        )
    try:
        done = subprocess.run(
            list(args),
            capture_output=True,
            text=True,
            timeout=COMMAND_S,
            env=None if env is None else dict(env),
        )
    except subprocess.TimeoutExpired:
        raise NoAllocation(
            f"{' '.join(args)} did not answer within {COMMAND_S:g}s (is slurmctld up?)"
        ) from None
    if done.returncode != 0:
        said = done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}"
        command = " ".join([a for a in args if not a.startswith("-")][:3])  # (options aside)
        raise NoAllocation(f"{command} failed: {said}")
    return done.stdout


def fields(line: str) -> dict[str, str]:
    """``Key=Value`` words of one line of ``scontrol show ... -o``."""
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


def current(env: Mapping[str, str] | None = None) -> Allocation:
    """The allocation this process runs in (its job must be running); ``NoAllocation``
    saying why not."""
    env = os.environ if env is None else env
    job = env.get("SLURM_JOB_ID") or env.get("SLURM_JOBID")
    if not job:
        raise NoAllocation(
            "the slurm backend runs a program inside a Slurm allocation, and SLURM_JOB_ID is "
            "not set: launch it in an sbatch script or an salloc shell, or submit it as a "
            "job with topo run FILE -b slurm"
        )
    # -d: each node's GRES (the GPUs the job holds there) besides the job's fields
    text = slurm("scontrol", "-d", "show", "job", "-o", job, env=env)
    lines = [line for line in text.splitlines() if line.strip()]
    parts = [fields(line) for line in lines]
    if not parts:
        raise NoAllocation(f"scontrol show job {job} described no job")
    nodes: list[SlurmNode] = []
    # one line per component of a heterogeneous job, in its order
    for line, shown in zip(lines, parts, strict=True):
        state = shown.get("JobState", "")
        # SIGNALING: running, being sent a signal (its time limit's warning, due already
        # when a busy node started topo: the guard acts on it once the run runs)
        if state not in ("RUNNING", "SIGNALING"):
            which = f"Slurm job {shown.get('JobId', job)}"
            if "HetJobOffset" in shown:
                which += f" (component {shown['HetJobOffset']} of job {job})"
            raise NoAllocation(f"{which} (SLURM_JOB_ID) is {state or 'unknown'}, not RUNNING")
        listed = shown.get("NodeList", "")
        names = slurm("scontrol", "show", "hostnames", listed, env=env).split()
        if not names:
            raise NoAllocation(f"Slurm job {job} has no nodes (NodeList={listed or '?'})")
        component = int(shown.get("HetJobOffset", "0") or 0)
        cpus = _per_node(shown.get("NumCPUs"), len(names))
        gpus = _gpus_by_node(line, env)
        nodes += [_node(name, env, component, cpus, gpus.get(name, ())) for name in names]
    here = env.get("SLURMD_NODENAME")
    partition = parts[0].get("Partition")
    on = here if any(n.name == here for n in nodes) else None
    return Allocation(job, tuple(nodes), on, partition)


def _per_node(total: str | None, nodes: int) -> int | None:
    """The CPUs a component holds per node (``NumCPUs`` over its nodes: Slurm gives each
    node of a component alike with ``--cpus-per-task``)."""
    try:
        return max(1, int(total or "") // nodes)
    except ValueError:
        return None


def _gpus_by_node(line: str, env: Mapping[str, str]) -> dict[str, tuple[int, ...]]:
    """The GPUs the job holds on each of its nodes: ``scontrol -d show job``'s
    ``Nodes=n[1-2] CPU_IDs=0-1 Mem=0 GRES=gpu:2(IDX:0-1)``, one such group per set of
    nodes held alike."""
    held: dict[str, tuple[int, ...]] = {}
    for listed, gres in re.findall(r"\bNodes=(\S+) .*?\bGRES=(\S*)", line):
        ids = gpu_indexes(gres)
        if ids:
            for name in slurm("scontrol", "show", "hostnames", listed, env=env).split():
                held[name] = ids
    return held


def gpu_indexes(gres: str) -> tuple[int, ...]:
    """The GPUs of a node's GRES in a job: ``gpu:2(IDX:1-2)``, ``gpu:a100:2(IDX:0,3)``
    (several kinds comma-separated); 0..n-1 where Slurm gives no indexes."""
    ids: list[int] = []
    for entry in re.split(r",(?![^(]*\))", gres):
        if not entry.startswith("gpu:"):
            continue
        found = re.search(r"\(IDX:([0-9,-]+)\)", entry)
        if found is None:
            ids += range(len(ids), len(ids) + gpus_in(entry))
            continue
        for part in found.group(1).split(","):
            first, _, last = part.partition("-")
            ids += range(int(first), int(last or first) + 1)
    return tuple(ids)


def _node(
    name: str,
    env: Mapping[str, str],
    component: int = 0,
    cpus: int | None = None,
    gpus: tuple[int, ...] = (),
) -> SlurmNode:
    """One node (of ``component``, ``cpus`` and ``gpus`` of it held) as ``scontrol show
    node`` describes it."""
    shown = fields(slurm("scontrol", "show", "node", "-o", name, env=env))
    features = shown.get("ActiveFeatures") or shown.get("Features") or ""
    labels = tuple(f for f in features.split(",") if f and f != "(null)")
    address = resolve(shown.get("NodeAddr") or name)
    return SlurmNode(name, address, labels, component, cpus, gpus)


def resolve(address: str) -> str:
    """``address`` as an IP address (a node's NodeAddr is often a host name)."""
    try:
        return socket.gethostbyname(address)
    except OSError:
        return address


def route_to(address: str) -> str:
    """This machine's address on the route to ``address`` (what that node can dial)."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        probe.connect((address, 9))  # no packet is sent: only the route is looked up
        return str(probe.getsockname()[0])
    except OSError:
        return "127.0.0.1"
    finally:
        probe.close()
