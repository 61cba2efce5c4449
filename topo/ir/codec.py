"""Lossless JSON encoding of the Program IR, versioned."""

from __future__ import annotations

import json
from typing import Any

from topo.ir import values
from topo.ir.program import (
    IR_VERSION,
    Edge,
    Executable,
    Group,
    Node,
    Program,
    Resources,
    RestartPolicy,
    RpcSettings,
    SourcePos,
    StopSettings,
)


class IRVersionError(ValueError):
    """The JSON was written by an incompatible version of the IR."""


def _pos(p: SourcePos | None) -> Any:
    return None if p is None else [p.file, p.line, p.col]


def _group_to(g: Group) -> dict[str, Any]:
    r = g.resources
    return {
        "name": g.name,
        "kind": g.kind,
        "target": g.target,
        "count": g.count,
        "enabled": g.enabled,
        "singleton": g.singleton,
        "per_process": g.per_process,
        "restart": {
            "policy": g.restart.policy,
            "max_restarts": g.restart.max_restarts,
            "backoff_s": g.restart.backoff_s,
            "backoff_max_s": g.restart.backoff_max_s,
        },
        "resources": {
            "env": values.to_json(r.env),
            "workdir": r.workdir,
            "cpus": None if r.cpus is None else list(r.cpus),
            "gpus": None if r.gpus is None else list(r.gpus),
            "host_labels": list(r.host_labels),
        },
        "rpc": {
            "threads": g.rpc.threads,
            "deadline_s": g.rpc.deadline_s,
            "max_message_mb": g.rpc.max_message_mb,
        },
        "stops_program": g.stops_program,
        "primary": g.primary,
        "description": g.description,
        "origin": _pos(g.origin),
        "draw": g.draw,
    }


def _group_from(d: dict[str, Any]) -> Group:
    r = d["resources"]
    env = values.from_json(r["env"])
    assert isinstance(env, values.FrozenMap)
    return Group(
        name=d["name"],
        kind=d["kind"],
        target=d["target"],
        count=d["count"],
        enabled=d["enabled"],
        singleton=d["singleton"],
        per_process=d["per_process"],
        restart=RestartPolicy(**d["restart"]),
        resources=Resources(
            env=env,
            workdir=r["workdir"],
            cpus=None if r["cpus"] is None else tuple(r["cpus"]),
            gpus=None if r["gpus"] is None else tuple(r["gpus"]),
            host_labels=tuple(r["host_labels"]),
        ),
        rpc=RpcSettings(**d["rpc"]),
        stops_program=d["stops_program"],
        primary=d["primary"],
        description=d["description"],
        origin=None if d["origin"] is None else SourcePos(*d["origin"]),
        draw=d.get("draw", ""),
    )


def program_to_dict(p: Program) -> dict[str, Any]:
    """The IR as plain JSON-ready data."""
    return {
        "version": p.version,
        "name": p.name,
        "seed": p.seed,
        "source": p.source,
        "params": values.to_json(p.params),
        "stop": {"grace_s": p.stop.grace_s, "timeout_s": p.stop.timeout_s},
        "groups": [_group_to(g) for g in p.groups],
        "nodes": [
            {
                "id": n.id,
                "group": n.group,
                "replica": n.replica,
                "seed": n.seed,
                "executable": n.executable,
                "args": values.to_json(n.args),
            }
            for n in p.nodes
        ],
        "edges": [[e.src, e.dst, e.arg, e.via] for e in p.edges],
        "executables": [
            {"id": e.id, "nodes": list(e.nodes), "mode": e.mode, "placement": e.placement}
            for e in p.executables
        ],
    }


def program_from_dict(d: dict[str, Any]) -> Program:
    """Rebuild a Program from :func:`program_to_dict` output."""
    version = d.get("version")
    if version != IR_VERSION:
        raise IRVersionError(
            f"this IR was written as version {version!r}; this topo reads version {IR_VERSION}"
        )
    params = values.from_json(d["params"])
    assert isinstance(params, values.FrozenMap)
    nodes = []
    for n in d["nodes"]:
        args = values.from_json(n["args"])
        assert isinstance(args, values.FrozenMap)
        nodes.append(Node(n["id"], n["group"], n["replica"], args, n["seed"], n["executable"]))
    return Program(
        name=d["name"],
        seed=d["seed"],
        params=params,
        groups=tuple(_group_from(g) for g in d["groups"]),
        nodes=tuple(nodes),
        edges=tuple(Edge(*e) for e in d["edges"]),
        executables=tuple(
            Executable(e["id"], tuple(e["nodes"]), e["mode"], e["placement"])
            for e in d["executables"]
        ),
        stop=StopSettings(**d["stop"]),
        source=d["source"],
        version=version,
    )


def dumps(p: Program, indent: int | None = 2) -> str:
    """The IR as a JSON string."""
    return json.dumps(program_to_dict(p), indent=indent)


def loads(text: str) -> Program:
    """A Program from a JSON string written by :func:`dumps`."""
    return program_from_dict(json.loads(text))
