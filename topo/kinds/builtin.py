"""The built-in node kinds: courier, py, reverb, cacher.

They are registered like any third-party kind, through the ``topo.kinds`` entry points
topo's own pyproject.toml declares (see :mod:`topo.kinds.catalog`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from topo.kinds.base import Look, NodeKind, Options
from topo.targets import TARGET_PATTERN


class CheckpointSpec(BaseModel):
    """Periodic checkpoint of a Reverb server."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    dir: str = Field(description="Directory the checkpoints are written to.")
    every_s: float = Field(600.0, gt=0, description="Seconds between checkpoints.")


class TargetOptions(Options):
    """courier and py: the user's target."""

    target: str | None = Field(
        None,
        pattern=TARGET_PATTERN,
        description="What builds the node, as 'package.module:attribute' (courier and py).",
    )


class ReverbOptions(Options):
    """reverb: the table factory and checkpointing."""

    tables: str | None = Field(
        None,
        pattern=TARGET_PATTERN,
        description="reverb only: 'module:function' returning the list of reverb.Table.",
    )
    checkpoint: CheckpointSpec | None = Field(
        None, description="reverb only: periodic checkpointing of the replay."
    )


class CacherOptions(Options):
    """cacher: the cached node and the cache's timing."""

    source: str | None = Field(
        None, description="cacher only: the node whose replies are cached, e.g. '@trainer'."
    )
    refresh_ms: int | None = Field(
        None, ge=0, description="cacher only: how often cached replies are refreshed, ms."
    )
    stale_ms: int | None = Field(
        None, ge=0, description="cacher only: oldest reply served before a call blocks, ms."
    )


def _reverb_args(o: ReverbOptions) -> dict[str, Any]:
    ckpt = o.checkpoint
    return {
        "tables": o.tables,
        "checkpoint_dir": ckpt.dir if ckpt else None,
        "checkpoint_every_s": ckpt.every_s if ckpt else None,
    }


def _reverb_fields(args: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    rest = dict(args)
    fields: dict[str, Any] = {"tables": rest.pop("tables", None)}
    ckpt, every = rest.pop("checkpoint_dir", None), rest.pop("checkpoint_every_s", None)
    if ckpt is not None:
        fields["checkpoint"] = {"dir": ckpt, **({"every_s": every} if every else {})}
    return fields, rest


def _cacher_args(o: CacherOptions) -> dict[str, Any]:
    return {
        "source": o.source,
        "refresh_ms": 1000 if o.refresh_ms is None else o.refresh_ms,
        "stale_ms": o.stale_ms,
    }


def _cacher_checks(o: CacherOptions) -> list[tuple[str, str]]:
    if o.refresh_ms and o.stale_ms is not None and o.stale_ms < o.refresh_ms:
        return [
            (
                "stale_ms",
                f"stale_ms ({o.stale_ms}) is shorter than refresh_ms ({o.refresh_ms}), "
                "so every call would block",
            )
        ]
    return []


# How the built-in kinds' nodes are drawn.
COURIER_LOOK = Look("box", "rounded,filled", ("(", ")"), "#e8f0fe", "#1a73e8", "blue")
PY_LOOK = Look("box", "filled", ("[", "]"), "#f1f3f4", "#5f6368", "white")
REVERB_LOOK = Look("cylinder", "filled", ("[(", ")]"), "#fce8e6", "#c5221f", "red")
CACHER_LOOK = Look("tab", "filled", ("[[", "]]"), "#fef7e0", "#b06000", "yellow")
# The built-in counter and steps limiter, served (courier) or run (py), draw as their own.
TARGET_ROLES = {"topo.nodes:Counter": "counter", "topo.nodes:StepsLimiter": "limiter"}
TARGET_LOOKS = {
    "counter": Look("hexagon", "filled", ("{{", "}}"), "#e6f4ea", "#137333", "green"),
    "limiter": Look("octagon", "filled", (">", "]"), "#fde7f3", "#a50e5f", "magenta"),
}

COURIER = NodeKind(
    name="courier",
    help="an object served over RPC (run() called if it has one)",
    options=TargetOptions,
    required="target",
    example="package.module:Class",
    import_fields=("target",),
    served=True,
    draw_targets=TARGET_ROLES,
    looks={"courier": COURIER_LOOK, **TARGET_LOOKS},
)
PY = NodeKind(
    name="py",
    help="a function or object run, no server",
    options=TargetOptions,
    required="target",
    example="package.module:Class",
    import_fields=("target",),
    served=False,
    draw_targets=TARGET_ROLES,
    looks={"py": PY_LOOK, **TARGET_LOOKS},
)
REVERB = NodeKind(
    name="reverb",
    help="a Reverb replay server",
    options=ReverbOptions,
    required="tables",
    example="package.module:make_tables",
    builtin_target="topo.nodes.reverb:ReverbServer",
    args=_reverb_args,
    fields_of=_reverb_fields,
    import_fields=("tables",),
    served=True,
    client="topo.kinds.clients:reverb_client",
    looks={"reverb": REVERB_LOOK},
)
CACHER = NodeKind(
    name="cacher",
    help="caches the replies of another node",
    options=CacherOptions,
    required="source",
    example='"@trainer"',
    builtin_target="topo.nodes.cacher:Cacher",
    args=_cacher_args,
    via={"source": "source"},
    checks=_cacher_checks,
    served=True,
    looks={"cacher": CACHER_LOOK},
)
