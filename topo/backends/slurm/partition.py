"""What a Slurm partition can hold, read from ``scontrol show partition -o`` and
``scontrol show node -o``: its limits (MaxNodes, MaxTime, MaxCPUsPerNode,
MaxMemPerNode) and its nodes (CPUs, memory, GPUs, features). Parsing is pure (tested on
Slurm's own text); ``read_cluster`` runs the two commands. Standard library only.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

from topo.diagnostics import TopoError

COMMAND_S = 60.0  # scontrol answers within this (a busy controller takes seconds)
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_/.:]*=")
_UNLIMITED = ("UNLIMITED", "INFINITE", "NONE", "N/A", "")


def fields(line: str) -> dict[str, str]:
    """One record of ``scontrol show ... -o`` as key -> value. Values may hold spaces
    (``OS=Linux 6.1 #1 SMP``, a node's Reason): a word that starts no ``Key=`` goes on
    the value before it."""
    out: dict[str, str] = {}
    last: str | None = None
    for word in line.split():
        if _KEY.match(word):
            last, _, value = word.partition("=")
            out[last] = value
        elif last is not None:
            out[last] += " " + word
    return out


def time_s(text: str) -> int | None:
    """A Slurm time (``MINUTES``, ``MINUTES:SECONDS``, ``HOURS:MINUTES:SECONDS``,
    ``DAYS-HOURS``, ``DAYS-HOURS:MINUTES``, ``DAYS-HOURS:MINUTES:SECONDS``) in seconds;
    None for no limit (``UNLIMITED``, ``INFINITE``). ``ValueError`` for anything else."""
    text = text.strip()
    if text.upper() in _UNLIMITED or text == "-1":
        return None
    days, dash, rest = text.partition("-")
    if not dash:
        days, rest = "0", text
    parts = rest.split(":")
    if not all(p.isdigit() for p in [days, *parts]) or len(parts) > 3:
        raise ValueError(f"not a Slurm time: {text!r}")
    numbers = [int(p) for p in parts]
    if dash:  # DAYS-HOURS[:MINUTES[:SECONDS]]
        numbers += [0] * (3 - len(numbers))
        hours, minutes, seconds = numbers
    elif len(numbers) == 1:  # MINUTES
        hours, minutes, seconds = 0, numbers[0], 0
    elif len(numbers) == 2:  # MINUTES:SECONDS
        hours, minutes, seconds = 0, numbers[0], numbers[1]
    else:
        hours, minutes, seconds = numbers
    return ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds


def show_time(seconds: int | None) -> str:
    """Seconds as Slurm writes a time limit (``1-02:03:04``, ``00:01:00``), or UNLIMITED."""
    if seconds is None:
        return "UNLIMITED"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    text = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def _count(text: str | None) -> int | None:
    """A count or None for no limit (``UNLIMITED``)."""
    if text is None or text.upper() in _UNLIMITED:
        return None
    number = re.match(r"\d+", text)
    return int(number.group()) if number else None


def memory_mib(text: str | None) -> int | None:
    """A Slurm memory amount (``4000``, ``4000M``, ``4G``; MiB when bare) in MiB, None for
    no limit."""
    if text is None or text.upper() in _UNLIMITED or text == "0":
        return None
    found = re.fullmatch(r"(\d+(?:\.\d+)?)([KMGTP]?)B?", text.strip().upper())
    if not found:
        return None
    scale = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}
    return int(float(found.group(1)) * scale[found.group(2)])


def gpus_in(gres: str | None) -> int:
    """The GPUs a node's ``Gres`` holds: ``gpu:2``, ``gpu:a100:4(S:0-1)``, several
    entries comma-separated; 0 for ``(null)``."""
    total = 0
    for entry in re.split(r",(?![^(]*\))", gres or ""):
        parts = re.sub(r"\(.*\)", "", entry).split(":")
        if parts[0] == "gpu" and len(parts) >= 2 and parts[-1].isdigit():
            total += int(parts[-1])
    return total


@dataclass(frozen=True)
class Node:
    """One node as the partition offers it."""

    name: str
    cpus: int
    memory_mib: int  # RealMemory
    gpus: int = 0
    features: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()

    @classmethod
    def parse(cls, record: Mapping[str, str]) -> Node:
        """From ``scontrol show node -o``'s fields."""
        cpus = _count(record.get("CPUEfctv")) or _count(record.get("CPUTot")) or 1
        features = record.get("AvailableFeatures", "")
        parts = record.get("Partitions", "")
        return cls(
            name=record.get("NodeName", "?"),
            cpus=cpus,
            memory_mib=_count(record.get("RealMemory")) or 0,
            gpus=gpus_in(record.get("Gres")),
            features=tuple(f for f in features.split(",") if f and f != "(null)"),
            partitions=tuple(p for p in parts.split(",") if p),
        )


@dataclass(frozen=True)
class Partition:
    """One partition's limits and its nodes (None: no limit)."""

    name: str
    default: bool
    state: str
    max_nodes: int | None
    max_time_s: int | None
    max_cpus_per_node: int | None
    max_mem_per_node_mib: int | None
    nodes: tuple[Node, ...]

    @classmethod
    def parse(cls, record: Mapping[str, str], nodes: tuple[Node, ...]) -> Partition:
        """From ``scontrol show partition -o``'s fields and the nodes that name it."""
        name = record.get("PartitionName", "?")
        try:
            max_time = time_s(record.get("MaxTime", "UNLIMITED"))
        except ValueError:
            max_time = None
        return cls(
            name=name,
            default=record.get("Default", "NO").upper() == "YES",
            state=record.get("State", "UP"),
            max_nodes=_count(record.get("MaxNodes")),
            max_time_s=max_time,
            max_cpus_per_node=_count(record.get("MaxCPUsPerNode")),
            max_mem_per_node_mib=memory_mib(record.get("MaxMemPerNode")),
            nodes=tuple(n for n in nodes if name in n.partitions),
        )


@dataclass(frozen=True)
class Cluster:
    """Every partition of the cluster, by name."""

    partitions: tuple[Partition, ...]

    def partition(self, name: str | None) -> Partition:
        """The partition ``name`` (None: the default one); a ``TopoError`` naming the
        partitions there are when there is no such one."""
        for part in self.partitions:
            if (part.name == name) if name is not None else part.default:
                return part
        names = ", ".join(p.name + ("*" if p.default else "") for p in self.partitions)
        if name is None:
            raise TopoError.one(
                f"this cluster has no default partition (partitions: {names or 'none'})",
                hint="give one: --partition NAME",
            )
        from topo.diagnostics import suggest

        close = suggest(name, [p.name for p in self.partitions])
        raise TopoError.one(
            f"--partition {name}: Slurm has no such partition (partitions: {names or 'none'})",
            hint=close or "sinfo lists the partitions you may submit to",
        )


def parse_cluster(partitions_text: str, nodes_text: str) -> Cluster:
    """The cluster from the text of ``scontrol show partition -o`` and ``scontrol show
    node -o`` (one record a line)."""
    nodes = tuple(Node.parse(fields(line)) for line in nodes_text.splitlines() if line.strip())
    parts = tuple(
        Partition.parse(fields(line), nodes)
        for line in partitions_text.splitlines()
        if line.startswith("PartitionName=")
    )
    return Cluster(parts)


def no_slurm() -> str | None:
    """Why Slurm's commands cannot be used here (None: they are on PATH)."""
    missing = [c for c in ("sbatch", "scontrol") if shutil.which(c) is None]
    if not missing:
        return None
    return (
        f"Slurm is not installed here: no {' or '.join(missing)} on PATH (the slurm backend "
        "submits with sbatch and reads the partition with scontrol)"
    )


def scontrol(*args: str, env: Mapping[str, str] | None = None) -> str:
    """The output of ``scontrol ARGS``; a ``TopoError`` in Slurm's words when it fails."""
    why = no_slurm()
    if why is not None:
        raise TopoError.one(why, hint="run topo on a login node of the cluster")
    try:
        done = subprocess.run(
            ["scontrol", *args],
            capture_output=True,
            text=True,
            timeout=COMMAND_S,
            env=dict(env) if env is not None else None,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise TopoError.one(
            f"scontrol {' '.join(args)} did not answer in {COMMAND_S:.0f} s (is slurmctld up?)"
        ) from None
    if done.returncode != 0:
        words = _said(done.stderr) or f"exit status {done.returncode}"
        raise TopoError.one(
            f"scontrol {' '.join(args)} failed: {words}",
            hint="run topo where sbatch works (a login node of the cluster), or set "
            "SLURM_CONF to the cluster's slurm.conf",
        )
    return done.stdout


def _said(stderr: str) -> str:
    """What a Slurm command said, its lines joined (its own words, fatal last)."""
    return "; ".join(line.strip() for line in stderr.splitlines() if line.strip())


def read_cluster(env: Mapping[str, str] | None = None) -> Cluster:
    """The partitions and nodes of the cluster this machine submits to."""
    partitions = scontrol("show", "partition", "-o", env=env)
    nodes = scontrol("show", "node", "-o", env=env)
    return parse_cluster(partitions, nodes)
