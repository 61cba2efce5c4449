"""The Program IR: a typed, fully expanded, immutable graph of nodes and executables.

Everything a backend or renderer needs is here, explicitly: concrete node ids,
resolved arguments with references, edges, per-node seeds, and the packing of
nodes into executables (the unit a backend starts). Nothing here points back
at YAML except :class:`SourcePos` (defined in :mod:`topo.diagnostics`), kept for
error messages.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Literal

from topo.diagnostics import SourcePos
from topo.ir.values import FrozenMap, Opaque, Value
from topo.vocab import EdgeVia, KindName

# 2: opaque values ({"$opaque": ...}) in node arguments and params.
# 3: per-node target, kind, factory, positional args, disable_run and rpc; group labels;
#    pickled payloads kept once in a table (see topo.ir.codec).
IR_VERSION = 4
READABLE_IR_VERSIONS = (3, 4)  # v3 has no group references (``$group``); it reads as is
DEFAULT_READY_TIMEOUT_S = 120.0  # a node still starting after this many seconds has failed
DEFAULT_STALL_AFTER_S = 300.0  # a node whose progress has not moved this long is flagged

RestartMode = Literal["never", "on-failure", "always"]
AcceleratorKind = Literal["gpu", "tpu", "auto"]  # auto: one the host has, else the CPU
ColocationMode = Literal["single", "replicas", "set"]


@dataclass(frozen=True, slots=True)
class RestartPolicy:
    """What to do when a node of the group fails."""

    policy: RestartMode = "never"
    max_restarts: int = 3
    backoff_s: float = 1.0
    backoff_max_s: float = 30.0


@dataclass(frozen=True, slots=True)
class Accelerators:
    """The accelerators each process of a group gets: their kind, how many (or which ones,
    by index on its host), and whether the group's processes share them."""

    kind: AcceleratorKind
    count: int = 1
    ids: tuple[int, ...] | None = None  # these devices of the host (count: their number)
    shared: bool = False  # the group's processes share the same devices


@dataclass(frozen=True, slots=True)
class Resources:
    """Process environment for a group: env vars, working dir, CPU/GPU visibility, host labels,
    memory limit, accelerators (a process that asks for none sees none: ``cpu_only``)."""

    env: FrozenMap = field(default_factory=FrozenMap)
    workdir: str | None = None
    cpus: tuple[int, ...] | None = None
    gpus: tuple[int, ...] | None = None
    host_labels: tuple[str, ...] = ()
    spread: bool = False  # each process of the group on a different host
    memory: int | None = None  # bytes each process of the group may use (procs, ssh)
    accelerators: Accelerators | None = None
    # None: CPU only unless the group asks for accelerators (or GPUs by id); False: the
    # process sees the machine's devices as they are (the default turned off)
    cpu_only: bool | None = None

    @property
    def sees_devices(self) -> bool:
        """Whether the process may open an accelerator: it asked for some, named GPUs, or
        turned the CPU-only default off."""
        if self.cpu_only is not None:
            return not self.cpu_only
        return self.accelerators is not None or bool(self.gpus)


@dataclass(frozen=True, slots=True)
class RpcSettings:
    """Per-group RPC server and client settings."""

    threads: int = 8
    deadline_s: float = 60.0
    max_message_mb: float = 512.0
    call_timeout_s: float | None = None  # deadline of calls *to* these nodes (beats the caller's)


@dataclass(frozen=True, slots=True)
class Group:
    """A group as compiled: settings shared by its replicas. Disabled groups are kept
    (with no nodes) so that renderers can show them greyed out."""

    name: str
    kind: KindName
    target: str
    count: int
    enabled: bool = True
    singleton: bool = True
    per_process: int | None = None
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    resources: Resources = field(default_factory=Resources)
    rpc: RpcSettings = field(default_factory=RpcSettings)
    stops_program: bool = False
    ready_timeout_s: float = DEFAULT_READY_TIMEOUT_S
    stall_after_s: float = DEFAULT_STALL_AFTER_S  # 0: never flagged
    primary: str | None = None
    description: str = ""
    origin: SourcePos | None = None
    draw: str = ""  # the drawing role of the group's kind, for renderers
    label: str = ""  # the name the program gave the group when it is not a valid group name


@dataclass(frozen=True, slots=True)
class Node:
    """One concrete node: ``actor/3`` built as ``group.target(*posargs, **args)``.

    A node built from Python (``topo.launchpad``) may differ from its group: its own
    ``kind`` and ``target`` (empty: the group's), or a ``factory`` -- a callable that cannot
    be imported by name (a closure, a bound method), carried pickled. ``rpc`` overrides
    the group's RPC settings for this node alone."""

    id: str
    group: str
    replica: int
    args: FrozenMap
    seed: int
    executable: str
    posargs: tuple[Value, ...] = ()
    kind: str = ""
    target: str = ""
    factory: Opaque | None = None
    disable_run: bool = False
    rpc: RpcSettings | None = None


@dataclass(frozen=True, slots=True)
class Edge:
    """``src`` holds a handle to ``dst`` in argument ``arg`` (a path like ``sources[1]``)."""

    src: str
    dst: str
    arg: str
    via: EdgeVia = "ref"


@dataclass(frozen=True, slots=True)
class Executable:
    """The unit a backend starts: one process (or one thread set), holding one or more nodes
    as threads. ``placement`` names a host-colocation set: executables sharing it must run
    on the same host."""

    id: str
    nodes: tuple[str, ...]
    mode: ColocationMode = "single"
    placement: str | None = None


@dataclass(frozen=True, slots=True)
class StopSettings:
    """Program-level stop behaviour."""

    grace_s: float = 5.0
    timeout_s: float | None = None


@dataclass(frozen=True, slots=True)
class SnapshotSettings:
    """When the program takes snapshots of its nodes' state, and how many a run keeps.
    The defaults take none: no clock, and none at a clean stop."""

    every_s: float | None = None  # a snapshot every this many seconds of running; None: never
    keep: int = 3  # snapshots a run keeps, the oldest removed first
    at_stop: bool = False  # one more at a clean stop
    pause_timeout_s: float = 30.0  # how long a snapshot waits for every node to pause

    @property
    def enabled(self) -> bool:
        """Whether any snapshot is taken without being asked for (on the clock or at stop)."""
        return self.every_s is not None or self.at_stop


@dataclass(frozen=True)
class Program:
    """A compiled topology. Immutable; JSON round-trip via :mod:`topo.ir.codec` is lossless."""

    name: str
    seed: int
    params: FrozenMap
    groups: tuple[Group, ...]
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    executables: tuple[Executable, ...]
    stop: StopSettings = field(default_factory=StopSettings)
    snapshots: SnapshotSettings = field(default_factory=SnapshotSettings)
    source: str | None = None
    version: int = IR_VERSION

    @cached_property
    def node_index(self) -> dict[str, Node]:
        """Node id -> node."""
        return {n.id: n for n in self.nodes}

    @cached_property
    def group_index(self) -> dict[str, Group]:
        """Group name -> group."""
        return {g.name: g for g in self.groups}

    @cached_property
    def executable_index(self) -> dict[str, Executable]:
        """Executable id -> executable."""
        return {e.id: e for e in self.executables}

    def node(self, node_id: str) -> Node:
        """The node with this id (KeyError if absent)."""
        return self.node_index[node_id]

    def group_of(self, node_id: str) -> Group:
        """The group a node belongs to."""
        return self.group_index[self.node_index[node_id].group]

    def kind_of(self, node_id: str) -> str:
        """The node's kind: its own, else its group's."""
        return self.node_index[node_id].kind or self.group_of(node_id).kind

    def target_of(self, node_id: str) -> str:
        """The node's ``module:attr`` target: its own, else its group's ("" with a factory)."""
        node = self.node_index[node_id]
        if node.factory is not None:
            return ""
        return node.target or self.group_of(node_id).target

    def rpc_of(self, node_id: str) -> RpcSettings:
        """The node's RPC settings: its own, else its group's."""
        return self.node_index[node_id].rpc or self.group_of(node_id).rpc

    def targets(self) -> set[str]:
        """Every ``module:attr`` target a node of an enabled group is built from."""
        return {t for n in self.nodes if (t := self.target_of(n.id))}

    def nodes_of(self, group: str) -> tuple[Node, ...]:
        """The replicas of a group, in replica order."""
        return tuple(n for n in self.nodes if n.group == group)

    def __getstate__(self) -> dict[str, object]:
        # Drop the cached indexes: they are derived and rebuilt on demand.
        return {k: v for k, v in self.__dict__.items() if not k.endswith("_index")}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
