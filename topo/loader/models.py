"""Pydantic models of a topology file: what the user wrote, after parameter interpolation.

Every field has a description; :mod:`topo.loader.schema` turns these models into the
JSON Schema in ``schemas/topology.schema.json`` that editors use for completion.
Argument values (``args``) are kept as written: references and per-replica
expressions are resolved by the compiler, per node.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    create_model,
    field_validator,
    model_validator,
)

from topo.kinds import catalog
from topo.kinds.builtin import CheckpointSpec
from topo.targets import TARGET_PATTERN
from topo.vocab import parse_size

NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_\-]*$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class ParamSpec(_Model):
    """A parameter in long form; the short form ``name: default`` means ``{default: ...}``."""

    default: Any = Field(None, description="Value used when not overridden with -p NAME=VALUE.")
    type: Literal["int", "float", "bool", "str", "list", "dict", "any"] | None = Field(
        None,
        description="Type that overrides must have; inferred from the default when omitted.",
    )
    help: str = Field("", description="One line shown by `topo validate` in the parameter table.")


class ColocateSpec(_Model):
    """Thread colocation of a group's replicas."""

    per_process: int = Field(
        ge=1,
        description="Replicas packed as threads into one process (Acme's num_actors_per_node).",
    )


class BackoffSpec(_Model):
    """Delay between restarts: doubles from initial_s up to max_s."""

    initial_s: float = Field(1.0, ge=0, description="Delay before the first restart, seconds.")
    max_s: float = Field(30.0, ge=0, description="Longest delay between restarts, seconds.")


class RestartSpec(_Model):
    """What happens when a node of this group fails (raises, or its process dies)."""

    policy: Literal["never", "on-failure", "always"] = Field(
        "never",
        description="never: a failure stops the program; on-failure: restart it when it fails; "
        "always: also restart it when its run() returns.",
    )
    max_restarts: int = Field(
        3, ge=0, description="Restarts allowed per node before the program is stopped."
    )
    backoff: BackoffSpec = Field(
        default_factory=lambda: BackoffSpec(), description="Delay between successive restarts."
    )


class AcceleratorsSpec(_Model):
    """The accelerators each process of the group gets (a process that asks for none is
    CPU-only: it cannot open one)."""

    kind: Literal["gpu", "tpu", "auto", "none"] = Field(
        description="The kind of accelerator: gpu or tpu; auto: one the host has (a GPU, "
        "else a TPU chip) if one is free, else the CPU; none: no accelerator (as without "
        "accelerators: for a parameter that turns it off).",
        json_schema_extra={"x-topo-expression": True},  # (topo.loader.schema)
    )
    count: int | None = Field(
        None, ge=1, description="How many each process gets (default 1; with ids, their number)."
    )
    ids: list[int] | None = Field(
        None,
        min_length=1,
        description="Exactly these devices of the host, by index (e.g. [0] for the first).",
    )
    shared: bool = Field(
        False,
        description="The group's processes share the same devices (a TPU chip opens in one "
        "process only: not for TPUs); by default each process gets its own.",
    )

    @field_validator("ids")
    @classmethod
    def _ids(cls, value: list[int] | None) -> list[int] | None:
        if value is not None:
            if any(i < 0 for i in value):
                raise ValueError("device indexes start at 0")
            if len(set(value)) != len(value):
                raise ValueError("a device is named twice")
        return value

    @model_validator(mode="after")
    def _fits(self) -> AcceleratorsSpec:
        if self.ids is not None and self.count is not None and self.count != len(self.ids):
            raise ValueError(f"count {self.count} and ids {self.ids} disagree: give one of them")
        if self.shared and self.kind == "tpu":
            raise ValueError("a TPU chip is opened by one process only: it cannot be shared")
        if self.kind in ("auto", "none") and (self.ids is not None or self.shared):
            raise ValueError(
                f"kind {self.kind} names no kind of device: ids and shared need gpu or tpu"
            )
        return self


class ResourcesSpec(_Model):
    """Process environment for every node of the group."""

    env: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="Environment variables set in the node's process."
    )
    workdir: str | None = Field(None, description="Working directory of the node's process.")
    cpus: list[int] | None = Field(
        None, description="CPU cores the process may run on (CPU affinity)."
    )
    gpus: list[int] | None = Field(
        None,
        description="GPUs visible to the process (CUDA_VISIBLE_DEVICES); [] hides every GPU.",
    )
    host_labels: list[str] = Field(
        default_factory=list,
        description="Labels a host must carry to run this group (ssh backend inventory).",
    )
    spread: bool = Field(
        False,
        description="Run each process of this group on a different host (ssh, ray): replicas "
        "survive the loss of one host; an error when there are fewer hosts than processes.",
    )
    accelerators: AcceleratorsSpec | None = Field(
        None,
        description="Accelerators for each process of this group (kind, count or ids, "
        "shared); a process that asks for none is CPU-only (see cpu_only).",
    )
    cpu_only: bool | None = Field(
        None,
        description="false: the processes of this group see the machine's accelerators as "
        "they are (the CPU-only default turned off). By default a process that asks for no "
        "accelerator cannot open one: JAX_PLATFORMS=cpu, CUDA_VISIBLE_DEVICES empty.",
    )
    memory: str | int | None = Field(
        None,
        description="Memory limit of each process of this group, e.g. 4GiB or 512MB (bytes "
        "when a number): a process that goes over it is killed and reported so (procs, ssh; "
        "not enforceable on threads).",
        examples=["4GiB", "512MiB"],
    )

    @field_validator("memory")
    @classmethod
    def _size(cls, value: str | int | None) -> str | int | None:
        if value is not None:
            parse_size(value)
        return value

    @model_validator(mode="after")
    def _devices(self) -> ResourcesSpec:
        if self.cpu_only and (self.accelerators is not None or self.gpus):
            raise ValueError("a group that asks for accelerators (or GPUs) is not cpu_only")
        if self.accelerators is not None and self.gpus is not None:
            raise ValueError(
                "give resources.accelerators ({kind: gpu, ids: [...]}) or resources.gpus, not both"
            )
        return self


class RpcSpec(_Model):
    """RPC settings for a group's servers and the handles it holds."""

    threads: int | None = Field(None, ge=1, description="Handler thread-pool size of the server.")
    deadline_s: float | None = Field(
        None, gt=0, description="Default deadline of calls made by this group's nodes, seconds."
    )
    max_message_mb: float | None = Field(
        None, gt=0, description="Largest request the server accepts, MiB; larger ones are dropped."
    )
    call_timeout_s: float | None = Field(
        None,
        gt=0,
        description="Deadline of calls made *to* this group's nodes, seconds, whoever calls "
        "(Launchpad's courier_client_kwargs call_timeout).",
    )


class GroupSpec(_Model):
    """A group of identical nodes: ``count`` replicas of ``target(**args)``.

    The fields common to every kind; :func:`topology_model` adds each registered kind's
    own fields (``target``, ``tables``, ``source``...) and restricts ``kind`` to their names."""

    kind: str = Field("courier", description="The node kind.")
    description: str = Field("", description="Free text shown in validate and graph.")
    count: int | None = Field(
        None,
        ge=0,
        description="Number of replicas, named group/0 ... group/N-1. Without count the group is "
        "a single node and '@group' is one handle; with count '@group' is a list of handles.",
    )
    enabled: bool = Field(
        True, description="false leaves the group out (e.g. enabled: ${max_steps is not None})."
    )
    args: dict[str, Any] = Field(
        default_factory=dict,
        description="Keyword arguments for target. Values may be references ('@group', "
        "'@group[i]'), {round_robin: [...]}, {import: 'module:attr'} (a Python object) and "
        "${...} expressions using params, replica and seed.",
    )
    overrides: dict[str, dict[str, Any]] = Field(
        default_factory=dict,
        description="Per-replica argument overrides: replica index -> args merged over args.",
    )
    colocate: ColocateSpec | None = Field(
        None, description="Pack replicas as threads into shared processes."
    )
    restart: RestartSpec | None = Field(None, description="Failure and restart policy.")
    resources: ResourcesSpec | None = Field(
        None, description="Environment, working directory, CPU/GPU visibility, host labels."
    )
    rpc: RpcSpec | None = Field(None, description="RPC settings overriding the program's.")
    stops_program: bool = Field(
        False, description="When this node's run() returns, stop the whole program."
    )
    disable_run: bool = Field(
        False,
        description="Serve the nodes without calling their run() (Launchpad's "
        "node.disable_run()); py nodes are built and not run.",
    )
    ready_timeout_s: float | None = Field(
        None,
        gt=0,
        description="Seconds a node may take to start (build its object, start serving) before "
        "it counts as failed, its stack dumped to its log (default 120).",
    )
    stall_after_s: float | None = Field(
        None,
        ge=0,
        description="Seconds without progress (no topo.metrics row) after which a running node "
        "that reported progress before is flagged stalled in the live view, status.json and "
        "a warning (default 300; longer for a node that usually reports more rarely; 0: never).",
    )
    primary: str | None = Field(
        None,
        description="Marks this group as secondaries of a singleton group, e.g. '@learner'.",
    )

    def options(self) -> Any:
        """This group's kind-specific fields, as its kind's options model."""
        return catalog.get_kind(self.kind).options_of(self)


class ColocationSpec(_Model):
    """Nodes of different groups placed together."""

    name: str | None = Field(
        None, pattern=NAME_PATTERN, description="Name of the set (default: joined group names)."
    )
    nodes: list[str] = Field(
        min_length=1, description="References to the nodes placed together: '@g' or '@g[i]'."
    )
    mode: Literal["threads", "host"] = Field(
        "threads",
        description="threads: one process, each node a thread; host: separate processes "
        "on the same host.",
    )


class StopSpec(_Model):
    """How the program stops."""

    grace_s: float = Field(
        5.0, ge=0, description="Seconds nodes get to finish after a stop before being killed."
    )
    timeout_s: float | None = Field(
        None, gt=0, description="Stop the program after this many seconds of running."
    )


class SnapshotsSpec(_Model):
    """When the program snapshots its nodes' state, and how many snapshots a run keeps."""

    every_s: float | None = Field(
        None,
        gt=0,
        description="Take a snapshot every this many seconds of running (null: not on a clock).",
    )
    keep: int = Field(3, ge=1, description="Snapshots a run keeps; the oldest is removed first.")
    at_stop: bool = Field(True, description="Take a snapshot at a clean stop.")
    pause_timeout_s: float = Field(
        30.0,
        gt=0,
        description="Seconds a snapshot waits for every node to reach a pause point before "
        "it is given up.",
    )


class TopologySpec(_Model):
    """A topology file."""

    schema_uri: str | None = Field(
        None, alias="$schema", description="JSON Schema of this file, for editors."
    )
    name: str = Field(pattern=NAME_PATTERN, description="Program name (run directories, logs).")
    description: str = Field("", description="Free text.")
    extends: str | list[str] | None = Field(
        None, description="Base file(s) this one is merged over, relative to this file."
    )
    params: dict[str, Any] = Field(
        default_factory=dict,
        description="Parameters: name -> default, or name -> {default, type, help}. "
        "Used as ${name} anywhere; overridden with -p name=value.",
    )
    seed: int | None = Field(
        None,
        description="Program seed; per-node seeds derive from it and the node id "
        "(default: the 'seed' parameter, else 0).",
    )
    rpc: RpcSpec | None = Field(None, description="Program-wide RPC defaults.")
    stop: StopSpec = Field(default_factory=lambda: StopSpec(), description="Program stop settings.")
    snapshots: SnapshotsSpec | None = Field(
        None,
        description="Snapshots of the program's state: every_s, keep, at_stop, pause_timeout_s "
        "(absent: none on a clock and none at the stop).",
    )
    nodes: dict[str, GroupSpec] = Field(
        min_length=1, description="The groups of nodes, by group name."
    )
    colocation: list[ColocationSpec] = Field(
        default_factory=list, description="Sets of nodes from different groups placed together."
    )

    @field_validator("nodes")
    @classmethod
    def _group_names(cls, nodes: dict[str, GroupSpec]) -> dict[str, GroupSpec]:
        import re

        for name in nodes:
            if not re.match(NAME_PATTERN, name):
                raise ValueError(
                    f"group name {name!r} must start with a letter or _ and contain only "
                    "letters, digits, _ and -"
                )
        return nodes

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, populate_by_name=True)


_models: dict[int, type[TopologySpec]] = {}


def topology_model() -> type[TopologySpec]:
    """The model of a topology file for the node kinds registered now: ``GroupSpec`` with
    every kind's own fields and ``kind`` one of their names. Rebuilt when a kind registers."""
    version = catalog.version()
    model = _models.get(version)
    if model is not None:
        return model
    kinds = catalog.all_kinds()
    names = tuple(k.name for k in kinds)
    fields: dict[str, Any] = {
        "kind": (
            Literal[names],
            Field("courier", description="; ".join(f"{k.name}: {k.help}" for k in kinds) + "."),
        )
    }
    for kind in kinds:
        for name, info in kind.options.model_fields.items():
            if name in GroupSpec.model_fields:
                raise ValueError(
                    f"node kind {kind.name!r}: its field {name!r} is a field of every group"
                )
            if name in fields and fields[name][0] != info.annotation:
                raise ValueError(
                    f"node kind {kind.name!r}: its field {name!r} has another type than the "
                    "field of that name of an earlier kind"
                )
            fields.setdefault(name, (info.annotation, info))
    group = create_model(  # type: ignore[call-overload]
        "GroupSpec", __base__=GroupSpec, __doc__=(GroupSpec.__doc__ or "").split("\n")[0], **fields
    )
    nodes_field = TopologySpec.model_fields["nodes"]
    model = create_model(  # type: ignore[call-overload]
        "TopologySpec",
        __base__=TopologySpec,
        __doc__=TopologySpec.__doc__,
        nodes=(dict[str, group], nodes_field),
    )
    _models.clear()
    _models[version] = model
    return model  # type: ignore[no-any-return]


__all__ = [
    "TARGET_PATTERN",
    "CheckpointSpec",
    "ColocationSpec",
    "GroupSpec",
    "SnapshotsSpec",
    "TopologySpec",
    "topology_model",
]
