"""Parameters: declarations under ``params:``, ``-p name=value`` overrides, type checks."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from topo.diagnostics import Diagnostic, TopoError, suggest
from topo.syntax import interpolate
from topo.syntax.expr import ExprError
from topo.syntax.source import SourceMap, parse_text

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LONG_FORM_KEYS = {"default", "type", "help"}
_TYPES: dict[str, tuple[type, ...]] = {
    "int": (int,),
    "float": (int, float),
    "bool": (bool,),
    "str": (str,),
    "list": (list,),
    "dict": (dict,),
}
# Names the compiler provides inside args; a parameter may not shadow them.
RESERVED = {"replica", "node_id", "group", "count", "seed.int", "seed.key"}


@dataclass(frozen=True)
class Param:
    """A declared parameter after overrides: its value, its type and where it came from."""

    name: str
    value: Any
    type: str
    help: str
    overridden: bool


def _infer_type(default: Any) -> str:
    for name, types in (("bool", (bool,)), ("int", (int,)), ("float", (float,))):
        if isinstance(default, types):
            return name
    for name in ("str", "list", "dict"):
        if isinstance(default, _TYPES[name]):
            return name
    return "any"


def _type_ok(value: Any, type_name: str) -> bool:
    if type_name == "any" or value is None:
        return True
    if isinstance(value, bool) and type_name in ("int", "float"):
        return False
    return isinstance(value, _TYPES[type_name])


def parse_override(text: str) -> tuple[str, Any]:
    """``name=value`` from the command line; the value is read as a YAML scalar or flow."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise TopoError.one(f"-p {text}: expected NAME=VALUE", hint="for example: -p num_actors=64")
    try:
        # the same bounded reader as files: an alias bomb in -p is refused, not expanded
        value = parse_text(raw, f"-p {name}").data if raw.strip() else ""
    except TopoError as exc:
        reason = exc.diagnostics[0].message
        shown = raw if len(raw) <= 60 else raw[:57] + "..."
        raise TopoError.one(
            f"-p {name}: cannot read the value {shown!r} ({reason})",
            hint="quote strings that contain ':', '[' or '{'",
        ) from None
    if isinstance(value, str) and raw.strip() and value != raw.strip():
        value = raw.strip()
    return name, value


_Declared = dict[str, tuple[Any, "str | None", str]]  # name -> (default, type, help)


def resolve_params(raw: Any, overrides: list[str], sources: SourceMap) -> dict[str, Param]:
    """Declared params with command-line overrides applied and ``${}`` defaults evaluated."""
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise TopoError.one("params must be a mapping of name: default", sources.pos(("params",)))
    errors: list[Diagnostic] = []
    declared = _declarations(raw, sources, errors)
    given = _given(overrides, declared, errors)
    if errors:
        raise TopoError(errors)
    params = _values(declared, given, overrides, sources, errors)
    if errors:
        raise TopoError(errors)
    return params


def _declarations(raw: dict[str, Any], sources: SourceMap, errors: list[Diagnostic]) -> _Declared:
    """Each declaration in short (``name: default``) or long form (``{default, type, help}``)."""
    declared: _Declared = {}
    for name, decl in raw.items():
        where = sources.pos(("params", name), key=True)
        if not _IDENT.match(name) or name in RESERVED or name == "seed.key":
            errors.append(
                Diagnostic(
                    f"parameter name '{name}' is not usable in expressions"
                    + (" (it is reserved for per-replica values)" if name in RESERVED else ""),
                    where,
                    "use letters, digits and _, starting with a letter",
                )
            )
            continue
        if isinstance(decl, dict) and decl and set(decl) <= _LONG_FORM_KEYS:
            type_name = decl.get("type")
            if type_name is not None and type_name not in (*_TYPES, "any"):
                errors.append(
                    Diagnostic(
                        f"parameter '{name}': unknown type {type_name!r}",
                        sources.pos(("params", name, "type")),
                        f"use one of: {', '.join([*_TYPES, 'any'])}",
                    )
                )
                continue
            declared[name] = (decl.get("default"), type_name, str(decl.get("help", "")))
        else:
            declared[name] = (decl, None, "")
    return declared


def _given(overrides: list[str], declared: _Declared, errors: list[Diagnostic]) -> dict[str, Any]:
    """``-p name=value`` overrides, each naming a declared parameter."""
    given: dict[str, Any] = {}
    for text in overrides:
        try:
            name, value = parse_override(text)
        except TopoError as exc:
            errors.extend(exc.diagnostics)
            continue
        if name not in declared:
            names = sorted(declared)
            hint = suggest(name, names) or (
                f"declared parameters: {', '.join(names)}"
                if names
                else "this file declares no params"
            )
            errors.append(Diagnostic(f"-p {text}: no parameter named '{name}'", None, hint))
            continue
        given[name] = value
    return given


def _values(
    declared: _Declared,
    given: dict[str, Any],
    overrides: list[str],
    sources: SourceMap,
    errors: list[Diagnostic],
) -> dict[str, Param]:
    """Each parameter's value, in declaration order (a default may use the ones above it),
    checked against its declared or inferred type."""
    params: dict[str, Param] = {}
    scope: dict[str, Any] = {}
    for name, (default, type_name, help_text) in declared.items():
        overridden = name in given
        value = given[name] if overridden else default
        where = sources.pos(("params", name))
        if not overridden and isinstance(value, str) and interpolate.has_interpolation(value):
            try:
                value = interpolate.render(value, scope)
            except ExprError as exc:
                known = f" (parameters defined above it: {', '.join(scope) or 'none'})"
                errors.append(Diagnostic(f"parameter '{name}': {exc}{known}", where))
                continue
        resolved_type = type_name or _infer_type(default)
        if resolved_type == "float" and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if resolved_type == "str" and overridden and not isinstance(value, (str, type(None))):
            value = str(given_raw(overrides, name))
        if not _type_ok(value, resolved_type):
            source = (
                f"-p {name}={given_raw(overrides, name)}" if overridden else f"parameter '{name}'"
            )
            errors.append(
                Diagnostic(
                    f"{source}: expected {resolved_type}, got {type(value).__name__} {value!r}",
                    None if overridden else where,
                    f"the default of '{name}' is {default!r}, so its type is {resolved_type}",
                )
            )
            continue
        params[name] = Param(name, value, resolved_type, help_text, overridden)
        scope[name] = value
    return params


def override_name(text: str) -> str:
    """The parameter a ``-p NAME=VALUE`` names (the whole text when it has no ``=``)."""
    name, sep, _ = text.partition("=")
    return name.strip() if sep else text


def merge_overrides(base: Sequence[str], more: Sequence[str]) -> list[str]:
    """``base``'s ``-p`` values changed by ``more``'s, by name (a later one wins), one
    per parameter, in the order each was first given: a run's parameters as a change
    (``topo apply -p``) leaves them."""
    merged: dict[str, str] = {}
    for text in [*base, *more]:
        merged[override_name(text)] = text
    return list(merged.values())


def given_raw(overrides: list[str], name: str) -> str:
    """The text given on the command line for ``name`` (the last one wins)."""
    raw = ""
    for text in overrides:
        key, _, value = text.partition("=")
        if key.strip() == name:
            raw = value
    return raw
