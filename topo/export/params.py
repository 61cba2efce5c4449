"""Where a Launchpad builder's parameters went in its exported YAML, so they can be
written ``${name}`` and stay tunable with ``-p``.

Found by difference: the builder is called again with one parameter moved to two other
values (an int ``v`` to ``v+1`` and ``v+2``, a float by ``+0.5`` and ``+1.25``, a string
with a suffix, a bool flipped once). A value of the exported document is a use of the
parameter when it is the parameter's value in the first build and exactly the moved
values in the others, everything else unchanged. Anything else -- a derived value
(``2 * n``, ``n - 1``, a name built from it), a change of structure (a group appearing,
per-replica overrides, a list growing), a builder that refuses the moved value -- leaves
the parameter out: its value stays written in, and the reason is reported. The caller
then checks each parameter by compiling the YAML with it moved (see ``topo.cli``).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from topo.export.writer import Path

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SKIPPED_NAMES = {"seed", "replica", "node_id", "group", "count"}  # taken by topo


@dataclass
class Uses:
    """The parameters written ``${name}``: their defaults, where they are used, and why
    the others were left out."""

    defaults: dict[str, Any] = field(default_factory=dict)
    paths: dict[str, list[Path]] = field(default_factory=dict)
    left_out: dict[str, str] = field(default_factory=dict)  # name -> reason

    def drop(self, name: str, reason: str) -> None:
        """Leave ``name`` out after all (its values stay written in)."""
        self.paths.pop(name, None)
        self.defaults.pop(name, None)
        self.left_out[name] = reason


def scalar_params(builder: Callable[..., Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The builder's parameters that have a plain value (int, float, str, bool): its
    signature's defaults, with ``given`` (the -p values) in their place."""
    out: dict[str, Any] = {}
    try:
        parameters = inspect.signature(builder).parameters.values()
    except (TypeError, ValueError):
        parameters = []  # type: ignore[assignment]
    for p in parameters:
        if p.default is not inspect.Parameter.empty:
            out[p.name] = p.default
    out.update(given)
    return {k: v for k, v in out.items() if type(v) in (int, float, str, bool)}


def moved(value: Any) -> list[Any]:
    """The other values a parameter is built with to find where it goes."""
    if type(value) is bool:
        return [not value]
    if type(value) is int:
        return [value + 1, value + 2]
    if type(value) is float:
        return [value + 0.5, value + 1.25]
    return [f"{value}-1", f"{value}-2"]


def find_uses(
    build: Callable[[dict[str, Any]], dict[str, Any]],
    given: Mapping[str, Any],
    defaults: Mapping[str, Any],
    base: dict[str, Any],
) -> Uses:
    """Where each of ``defaults`` goes in ``base`` (the document built with ``given``);
    ``build(kwargs)`` is the document of the builder called with ``kwargs`` (it raises
    on failure)."""
    uses = Uses()
    for name, value in defaults.items():
        if name == "seed":
            uses.left_out[name] = "the file's own seed (-p seed=N) stands for it"
            continue
        if not _IDENT.match(name) or name in _SKIPPED_NAMES:
            uses.left_out[name] = f"{name!r} is a name topo uses itself"
            continue
        others: list[dict[str, Any]] = []
        try:
            for v in moved(value):
                others.append(build({**given, name: v}))
        except Exception as exc:
            uses.left_out[name] = f"the builder refused {name}={v!r} ({exc})"
            continue
        if any(o.get("name") != base.get("name") for o in others):
            uses.left_out[name] = "it names the program, and the file's name is fixed"
            continue
        found: list[Path] = []
        reason = _compare(_body(base), [_body(o) for o in others], value, moved(value), (), found)
        if reason is not None:
            uses.left_out[name] = reason
        elif not found:
            uses.left_out[name] = "the program does not change with it"
        else:
            uses.defaults[name] = value
            uses.paths[name] = found
    return uses


def _body(doc: dict[str, Any]) -> dict[str, Any]:
    """The parts of a document parameters may appear in (not its name or params)."""
    return {k: v for k, v in doc.items() if k not in ("name", "params")}


def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _compare(
    base: Any, others: list[Any], value: Any, values: list[Any], path: Path, found: list[Path]
) -> str | None:
    """Walk ``base`` and the ``others`` together, adding to ``found`` the paths where
    they hold ``value`` and ``values``; a reason when they differ in any other way."""
    where = ".".join(path) or "the document"
    if isinstance(base, dict):
        if any(not isinstance(o, dict) or list(o) != list(base) for o in others):
            return f"it changes the structure at {where} (not a plain substitution)"
        for key in base:
            reason = _compare(
                base[key], [o[key] for o in others], value, values, (*path, key), found
            )
            if reason is not None:
                return reason
        return None
    if isinstance(base, list):
        if any(not isinstance(o, list) or len(o) != len(base) for o in others):
            return f"it changes the length of {where} (not a plain substitution)"
        for i, item in enumerate(base):
            reason = _compare(item, [o[i] for o in others], value, values, (*path, str(i)), found)
            if reason is not None:
                return reason
        return None
    if all(_same(o, base) for o in others):
        return None
    if _same(base, value) and all(_same(o, v) for o, v in zip(others, values, strict=True)):
        found.append(path)
        return None
    return f"{where} is computed from it (not the value itself)"
