"""Launchpad node arguments as IR values: handles become references, other objects
opaque values (one per distinct object, however many nodes share it), and positional
arguments are bound to their parameter names."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from topo.diagnostics import Diagnostic, SourcePos, TopoError
from topo.ir import FrozenMap, Opaque, Ref, Value
from topo.ir.values import import_path_of
from topo.launchpad.nodes.base import NodeHandle


class ProgramError(TopoError, ValueError):
    """A Launchpad program topo cannot build: diagnostics at the ``add_node`` calls that
    added the nodes at fault (the message names the node and argument). A ValueError, as
    Launchpad's own errors are, and a TopoError, so the CLI shows it as it shows YAML's."""

    def __init__(
        self,
        problem: str | Sequence[Diagnostic],
        pos: SourcePos | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__([Diagnostic(problem, pos, hint)] if isinstance(problem, str) else problem)

    def __str__(self) -> str:
        lines = []
        for d in self.diagnostics:
            lines.append(f"{d.pos}: {d.message}" if d.pos else d.message)
            if d.hint:
                lines.append(f"  hint: {d.hint}")
        return "\n".join(lines)

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (list(self.diagnostics),)

    def at(self, pos: SourcePos | None) -> ProgramError:
        """The same error, placed at ``pos`` where it had no position."""
        if pos is None:
            return self
        return ProgramError(
            [d if d.pos else dataclasses.replace(d, pos=pos) for d in self.diagnostics]
        )


class Values:
    """Turns constructor arguments into IR values; one Opaque per distinct object."""

    def __init__(self, node_ids: dict[int, str], live: Callable[[Any], str] | None) -> None:
        self.node_ids = node_ids
        self.live = live
        self._opaque: dict[int, tuple[Any, Opaque]] = {}

    def opaque(self, obj: Any) -> Opaque:
        hit = self._opaque.get(id(obj))
        if hit is None or hit[0] is not obj:
            if self.live is not None and import_path_of(obj) is None:
                path = self.live(obj)
                hit = (obj, Opaque(f"<live {type(obj).__name__}>", import_path=path))
            else:
                hit = (obj, Opaque.of(obj))
            self._opaque[id(obj)] = hit
        return hit[1]

    def value(self, obj: Any, where: str) -> Value:
        if isinstance(obj, NodeHandle):
            node_id = self.node_ids.get(obj.node.uid)
            if node_id is None:
                raise ProgramError(
                    f"{where} is a handle to {obj.node.describe()}, which was never added to "
                    "the program: add it with program.add_node(...) (or inside a colocation)"
                )
            return Ref(node_id)
        if obj is None or isinstance(obj, bool | int | float | str):
            return obj
        if isinstance(obj, list | tuple):
            return tuple(self.value(v, f"{where}[{i}]") for i, v in enumerate(obj))
        if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
            return FrozenMap({k: self.value(v, f"{where}[{k!r}]") for k, v in obj.items()})
        try:
            return self.opaque(obj)
        except TypeError as exc:
            raise ProgramError(f"{where}: {exc}") from None


def bind(
    constructor: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], who: str
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` with positional arguments moved to their parameter names, when
    the signature is known and has no ``*args`` taking any; a call that cannot bind is an
    error now, not in a node at run time."""
    try:
        sig = inspect.signature(constructor)
    except (TypeError, ValueError):
        return args, dict(kwargs)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:
        raise ProgramError(f"{who}: {_callable_name(constructor)}() {exc}") from None
    named: dict[str, Any] = {}
    for name, value in bound.arguments.items():
        kind = sig.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            if value:
                return args, dict(kwargs)
        elif kind is inspect.Parameter.VAR_KEYWORD:
            named.update(value)
        elif kind is inspect.Parameter.POSITIONAL_ONLY:
            return args, dict(kwargs)
        else:
            named[name] = value
    return (), named


def _callable_name(obj: Any) -> str:
    return getattr(obj, "__qualname__", None) or type(obj).__name__
