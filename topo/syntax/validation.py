"""Turning pydantic validation errors into user diagnostics with file:line:col."""

from __future__ import annotations

import types
import typing
from typing import Any, Union

from pydantic import BaseModel, ValidationError

from topo.diagnostics import Diagnostic, suggest
from topo.syntax.source import PathKey, SourceMap

_EXPECTED = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "string_type": "a string",
    "dict_type": "a mapping (key: value lines)",
    "list_type": "a list",
    "model_type": "a mapping (key: value lines)",
    "model_attributes_type": "a mapping (key: value lines)",
    "none_required": "null",
}


def _model_fields(model: type[BaseModel]) -> dict[str, Any]:
    out = {}
    for name, info in model.model_fields.items():
        out[info.alias or name] = info.annotation
    return out


def _unwrap(annotation: Any) -> list[Any]:
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        return [a for arg in typing.get_args(annotation) for a in _unwrap(arg)]
    return [annotation]


def model_at(root: type[BaseModel], path: PathKey) -> type[BaseModel] | None:
    """The model class that validates the mapping at ``path``, if there is one."""
    current: list[Any] = [root]
    for part in path:
        nxt: list[Any] = []
        for ann in current:
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                field = _model_fields(ann).get(str(part))
                if field is not None:
                    nxt.extend(_unwrap(field))
            else:
                origin = typing.get_origin(ann)
                args = typing.get_args(ann)
                if origin is dict and len(args) == 2:
                    nxt.extend(_unwrap(args[1]))
                elif origin is list and args:
                    nxt.extend(_unwrap(args[0]))
        current = nxt
    for ann in current:
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            return ann
    return None


def _data_path(data: Any, loc: tuple[Any, ...]) -> PathKey:
    """Map a pydantic loc onto the data tree, skipping union-member tags pydantic inserts."""
    path: list[str | int] = []
    node = data
    for part in loc:
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            path.append(part)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            path.append(part)
            node = node[part]
        elif isinstance(node, dict) and isinstance(part, str | int):
            # a key that is absent (missing / extra) or a union tag; keep real-looking keys
            if not _looks_like_tag(part):
                path.append(part)
                node = None
    return tuple(path)


def _looks_like_tag(part: Any) -> bool:
    return isinstance(part, str) and (
        "[" in part
        or part in {"str", "int", "float", "bool", "list", "dict", "none"}
        or part.startswith("function-")
    )


def describe(path: PathKey) -> str:
    """Human name of a place in the file: 'group actor', 'nodes.actor.restart', 'the top level'."""
    if not path:
        return "the top level"
    if len(path) == 2 and path[0] == "nodes":
        return f"group '{path[1]}'"
    if len(path) >= 2 and path[0] == "nodes":
        rest = ".".join(str(p) for p in path[2:])
        return f"'{rest}' of group '{path[1]}'"
    return "'" + ".".join(str(p) for p in path) + "'"


def diagnostics_from(
    exc: ValidationError, data: Any, sources: SourceMap, root: type[BaseModel]
) -> list[Diagnostic]:
    """One diagnostic per offending place in the file (union alternatives merged)."""
    by_path: dict[tuple[PathKey, str], list[Any]] = {}
    for err in exc.errors(include_url=False):
        path = _data_path(data, tuple(err["loc"]))
        group = (
            "extra"
            if err["type"] == "extra_forbidden"
            else ("missing" if err["type"] == "missing" else "value")
        )
        by_path.setdefault((path, group), []).append(err)

    out: list[Diagnostic] = []
    for (path, group), errs in by_path.items():
        if group == "extra":
            key = str(path[-1]) if path else "?"
            parent = path[:-1]
            model = model_at(root, parent)
            known = sorted(_model_fields(model)) if model else []
            hint = suggest(key, known) or (f"allowed keys: {', '.join(known)}" if known else None)
            out.append(
                Diagnostic(
                    f"unknown key '{key}' in {describe(parent)}", sources.pos(path, key=True), hint
                )
            )
        elif group == "missing":
            key = str(path[-1]) if path else "?"
            out.append(
                Diagnostic(
                    f"{describe(path[:-1])} is missing the required key '{key}'",
                    sources.pos(path[:-1], key=True),
                )
            )
        else:
            out.append(_value_diagnostic(path, errs, sources))
    return out


def _value_diagnostic(path: PathKey, errs: list[dict[str, Any]], sources: SourceMap) -> Diagnostic:
    where = sources.pos(path)
    name = describe(path)
    value = errs[0].get("input")
    shown = _show(value)
    expected = [_EXPECTED[e["type"]] for e in errs if e["type"] in _EXPECTED]
    custom = [e for e in errs if e["type"] not in _EXPECTED]
    hint = None
    if custom:
        e = custom[0]
        ctx = e.get("ctx") or {}
        if e["type"] == "string_pattern_mismatch":
            if "pattern" in ctx and ":" in str(ctx["pattern"]):
                return Diagnostic(
                    f"{name} must have the form 'package.module:attribute', got {shown}",
                    where,
                    "for example: examples.agents.dqn:Actor",
                )
            return Diagnostic(
                f"{name}: {shown} must start with a letter or _ and contain only letters, "
                "digits, _ and -",
                where,
            )
        if e["type"] == "literal_error":
            return Diagnostic(f"{name} must be one of {ctx.get('expected')}, got {shown}", where)
        if e["type"] in ("greater_than_equal", "greater_than"):
            op = "≥" if e["type"] == "greater_than_equal" else ">"
            bound = ctx.get("ge", ctx.get("gt"))
            return Diagnostic(f"{name} must be {op} {bound}, got {shown}", where)
        if e["type"] in ("too_short",):
            return Diagnostic(f"{name} must not be empty", where)
        if not expected:
            msg = str(e["msg"])
            msg = msg.removeprefix("Value error, ")
            return Diagnostic(f"{name}: {msg}", where)
    if isinstance(value, str) and "${" in value:
        hint = "the expression is evaluated before the type is checked"
    if isinstance(value, float) and any(e["type"].startswith("int") for e in errs):
        hint = "use // for integer division in ${...}"
    unique = list(dict.fromkeys(expected))
    return Diagnostic(f"{name} must be {' or '.join(unique)}, got {shown}", where, hint)


def _show(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "null (nothing)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
