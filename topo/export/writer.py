"""A compiled Program IR -> the text of a topology YAML file that compiles back to it.

Reads the IR only. Equal replicas become ``count:``, per-replica values ``${replica}``,
``{round_robin: [...]}`` or ``overrides:``, thread colocation ``colocate:`` or
``colocation:``. What YAML cannot say (a closure as a constructor, a pickled argument)
is collected and raised as one :class:`ExportError` naming every node and argument.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from topo.diagnostics import Diagnostic, TopoError
from topo.export.args import ArgWriter, Problem
from topo.export.layout import Layout, OutGroup, split_groups
from topo.ir import (
    Program,
    Resources,
    RestartPolicy,
    RpcSettings,
    SnapshotSettings,
    StopSettings,
)
from topo.ir.program import DEFAULT_READY_TIMEOUT_S, DEFAULT_STALL_AFTER_S
from topo.kinds import DEFAULT_KIND, NodeKind, UnknownKindError, get_kind
from topo.vocab import format_size


class ExportError(TopoError):
    """The program cannot be written as YAML; one diagnostic per problem."""


@dataclass
class Exported:
    """The YAML text and how its ids map to the IR's.

    ``node_ids``/``executable_ids`` map IR ids to the YAML program's (they change where a
    group was split); ``edge_via`` gives the label YAML puts on edges of round-robin
    arguments, keyed by (YAML node id, argument); ``seed_keys`` lists the
    ``group.argument`` PRNG keys written as ``${seed.key}``; ``renamed`` the groups split
    off, new name -> the group they came from."""

    text: str
    node_ids: dict[str, str]
    executable_ids: dict[str, str]
    edge_via: dict[tuple[str, str], str] = field(default_factory=dict)
    seed_keys: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)


Path = tuple[str, ...]  # keys from the document's root to one value


@dataclass
class Document:
    """The YAML document of a program as data, before it is written."""

    doc: dict[str, Any]
    layout: Layout
    writer: ArgWriter


def export_doc(program: Program) -> Document:
    """The topology YAML of ``program`` as data (params: the seed only).
    :class:`ExportError` lists every problem."""
    layout = split_groups(program)
    writer = ArgWriter(program, layout)
    nodes: dict[str, Any] = {}
    for og in layout.groups:
        _check_nodes(program, og, writer.problems)
        nodes[og.name] = _group(program, og, writer)
    if writer.problems:
        raise ExportError([_diagnostic(program, layout, p) for p in _dedupe(writer.problems)])
    doc: dict[str, Any] = {"name": program.name}
    doc["params"] = {"seed": program.seed}
    stop = _changed(program.stop, StopSettings())
    if stop:
        doc["stop"] = stop
    if program.snapshots != SnapshotSettings():
        # Written as a section, whose at_stop defaults to true (the IR's to false: none
        # are taken when the section is absent).
        doc["snapshots"] = _changed(program.snapshots, SnapshotSettings(at_stop=True))
    doc["nodes"] = nodes
    if layout.colocation:
        doc["colocation"] = layout.colocation
    return Document(doc, layout, writer)


def export_program(
    program: Program,
    *,
    schema: str,
    header: Sequence[str] = (),
    params: Mapping[str, Any] | None = None,
    uses: Mapping[str, Sequence[Path]] | None = None,
) -> Exported:
    """The topology YAML of ``program``; ``schema`` goes in the ``$schema`` modeline and
    ``header`` lines become comments. ``params`` are declared after the seed with their
    defaults, and each value at a path of ``uses[name]`` is written ``${name}``.
    :class:`ExportError` lists every problem."""
    made = export_doc(program)
    doc, layout, writer = made.doc, made.layout, made.writer
    doc["params"].update(params or {})
    for name, paths in (uses or {}).items():
        for path in paths:
            _put(doc, path, "${" + name + "}")
    lines = [f"# yaml-language-server: $schema={schema}", *(f"# {h}" for h in header)]
    if writer.seed_keys:
        lines += [
            "# PRNG keys are written ${seed.key}: topo derives each node's key from the program",
            "# seed (-p seed=N), so the values differ from the Python program's and each node",
            "# still gets its own key. Written so:",
            *(f"#   {k}" for k in writer.seed_keys),
        ]
    return Exported(
        "\n".join(lines) + "\n" + _dump(doc),
        dict(layout.node_ids),
        dict(layout.executable_ids),
        dict(writer.edge_via),
        list(writer.seed_keys),
        {og.name: og.origin.name for og in layout.groups if og.name != og.origin.name},
    )


def _put(doc: Any, path: Path, value: Any) -> None:
    """Set the value at ``path`` (dict keys, or list indexes written as text)."""
    *parents, last = path
    for key in parents:
        doc = doc[int(key)] if isinstance(doc, list) else doc[key]
    if isinstance(doc, list):
        doc[int(last)] = value
    else:
        doc[last] = value


def _check_nodes(program: Program, og: OutGroup, problems: list[Problem]) -> None:
    for n in og.nodes:
        if n.factory is not None:
            name = _callable_name(n.factory.description)
            problems.append(
                Problem(
                    n.id,
                    None,
                    f"is built by {n.factory.description}, which cannot be imported by name "
                    "(a closure, lambda, bound method or object)",
                    "replace the lambda with a module-level function"
                    if name == "lambda"
                    else f"make {name} a module-level function or class",
                )
            )
        if n.posargs:
            problems.append(
                Problem(
                    n.id,
                    None,
                    f"passes {len(n.posargs)} positional argument(s) that have no parameter "
                    "name (the constructor takes *args or positional-only parameters)",
                    "give the constructor named parameters, or pass the arguments by keyword",
                )
            )
    for attr in ("disable_run", "rpc"):
        values = [program.rpc_of(n.id) if attr == "rpc" else n.disable_run for n in og.nodes]
        if any(v != values[0] for v in values[1:]):
            odd = next(n for n, v in zip(og.nodes, values, strict=True) if v != values[0])
            problems.append(
                Problem(
                    odd.id,
                    None,
                    f"has other {attr} settings than {og.nodes[0].id}; YAML sets {attr} per group",
                    f"give every node of the group the same {attr} settings",
                )
            )


def _callable_name(description: str) -> str:
    """``<pickled function make.<locals>.build_actor, 2 KiB>`` -> ``build_actor``."""
    words = description.strip("<>").split(",")[0].split()
    name = words[-1] if words else "the constructor"
    return name.rpartition(".")[2] or name


def _group(program: Program, og: OutGroup, writer: ArgWriter) -> dict[str, Any]:
    g = og.origin
    out: dict[str, Any] = {}
    try:
        kind: NodeKind | None = get_kind(og.kind)
    except UnknownKindError as exc:
        kind = None
        if og.nodes:
            writer.problems.append(
                Problem(og.nodes[0].id, None, f"is of an {exc}", "install the kind's package")
            )
    if og.kind != DEFAULT_KIND:
        out["kind"] = og.kind
    if kind is not None and kind.builtin_target is None and og.target:
        out["target"] = og.target
    if not og.singleton:
        out["count"] = len(og.nodes)
    if not g.enabled:
        out["enabled"] = False
    if not og.nodes or kind is None:
        return out
    if og.per_process:
        out["colocate"] = {"per_process": og.per_process}
    first = og.nodes[0]
    if first.disable_run:
        out["disable_run"] = True
    if g.stops_program:
        out["stops_program"] = True
    if g.primary:
        out["primary"] = "@" + g.primary
    if g.description or g.label:
        out["description"] = g.description or f"Launchpad label {g.label!r}"
    if g.ready_timeout_s != DEFAULT_READY_TIMEOUT_S:
        out["ready_timeout_s"] = g.ready_timeout_s
    if g.stall_after_s != DEFAULT_STALL_AFTER_S:
        out["stall_after_s"] = g.stall_after_s
    for key, value in (
        ("rpc", _changed(program.rpc_of(first.id), RpcSettings())),
        ("resources", _resources(g.resources)),
        ("restart", _restart(g.restart)),
    ):
        if value:
            out[key] = value
    args, overrides = writer.group_args(og, skip=kind.arg_names)
    complete = set(args) == set(first.args)  # else a problem was reported already
    fields, args = _kind_fields(kind, args, first.id, writer.problems if complete else [])
    out.update(fields)
    if args:
        out["args"] = args
    if overrides:
        out["overrides"] = overrides
    return out


def _kind_fields(
    kind: NodeKind, args: dict[str, Any], node: str, problems: list[Problem]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The kind's own YAML fields (None ones left out) and the remaining args, from the
    group's args; a problem when the fields do not give those args back."""
    fields, rest = kind.split_args(args)
    fields = {k: v for k, v in fields.items() if v is not None}
    given = {k: args[k] for k in kind.arg_names if k in args}
    if given and _canon(_args_from(kind, fields)) != _canon(given):
        problems.append(
            Problem(
                node,
                None,
                f"has arguments ({', '.join(given)}) that kind {kind.name!r} does not give "
                f"back from the YAML fields written for them ({', '.join(fields) or 'none'})",
                f"declare fields_of on kind {kind.name!r}: the inverse of its args",
            )
        )
    return fields, rest


def _args_from(kind: NodeKind, fields: dict[str, Any]) -> dict[str, Any] | None:
    """What the kind passes from ``fields`` (None when they are not its fields)."""
    try:
        options = kind.options.model_validate(fields, strict=False)
    except Exception:  # YAML data the model does not take ({import: ...}): as written
        options = kind.options.model_construct(**fields)
    try:
        return kind.args(options)
    except Exception:
        return None


def _canon(data: Any) -> str:
    return json.dumps(data, sort_keys=True, default=repr)


def _changed(value: Any, default: Any) -> dict[str, Any]:
    """The fields of a settings dataclass that differ from its defaults."""
    names = getattr(type(value), "__dataclass_fields__", {})
    return {n: getattr(value, n) for n in names if getattr(value, n) != getattr(default, n)}


def _resources(r: Resources) -> dict[str, Any]:
    out = _changed(r, Resources())
    if "env" in out:
        out["env"] = dict(out["env"])
    for key in ("cpus", "gpus", "host_labels"):
        if out.get(key) is not None:
            out[key] = list(out[key])
    if out.get("memory") is not None:
        out["memory"] = format_size(out["memory"]).replace(" ", "")
    return out


def _restart(r: RestartPolicy) -> dict[str, Any]:
    out: dict[str, Any] = {}
    base = RestartPolicy()
    if (r.policy, r.max_restarts) != (base.policy, base.max_restarts):
        out = {"policy": r.policy, "max_restarts": r.max_restarts}
    if (r.backoff_s, r.backoff_max_s) != (base.backoff_s, base.backoff_max_s):
        out["backoff"] = {"initial_s": r.backoff_s, "max_s": r.backoff_max_s}
    return out


def _dedupe(problems: list[Problem]) -> list[tuple[Problem, int]]:
    """One report per (group, argument, message), with how many more nodes have it."""
    seen: dict[tuple[str, str | None, str], list[Problem]] = {}
    for p in problems:
        seen.setdefault((p.node.split("/")[0], p.arg, p.message), []).append(p)
    return [(ps[0], len(ps) - 1) for ps in seen.values()]


def _diagnostic(program: Program, layout: Layout, found: tuple[Problem, int]) -> Diagnostic:
    p, more = found
    group = program.group_of(p.node)
    label = f" (group {group.label or group.name!r})" if "/" in p.node else ""
    who = f"node {p.node}{label}"
    if more:
        who += f" and {more} more node(s) of its group"
    what = f"argument {p.arg!r} " if p.arg else ""
    return Diagnostic(f"{who}: {what}{p.message}", None, p.hint)


def _dump(doc: dict[str, Any]) -> str:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.sort_base_mapping_type_on_output = False  # type: ignore[assignment]
    yaml.width = 100
    yaml.indent(mapping=2, sequence=4, offset=2)
    buf = io.StringIO()
    yaml.dump(doc, buf)
    return buf.getvalue()
