"""Command-line values converted without pydantic.

typer (0.29) converts every option value through a pydantic ``TypeAdapter``: importing
pydantic and building the adapters costs about 0.1 s, more than the rest of ``topo ps``.
A plain ``str``, ``Path``, ``int``, ``float`` or ``bool`` (or a list of them) is converted
here instead (``install`` puts this first in typer's parameters); a value that does not
convert, a bound it breaks, or any other type goes to typer's own conversion, so messages
and behaviour stay typer's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

from typer import _click
from typer._coercion import RuntimeParam, TypeDescriptor, build_runtime_param
from typer.core import _TyperParameter

_PLAIN = (str, Path, int, float, bool)
# ParameterInfo settings that change how a value converts: only their defaults are plain.
_PATH_DEFAULTS = {
    "exists": False,
    "resolve_path": False,
    "allow_dash": False,
    "path_type": None,
    "dir_okay": True,
    "file_okay": True,
    "writable": False,
}


class _Unplain(Exception):
    """A value this module leaves to typer."""


def _leaf(kind: type, value: Any, low: Any, high: Any) -> Any:
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise _Unplain
    if isinstance(value, bytes):
        raise _Unplain
    if kind is str:
        return str(value)
    if kind is Path:
        return value if isinstance(value, Path) else Path(value)
    if isinstance(value, bool):
        raise _Unplain
    try:
        number = kind(value) if not isinstance(value, kind) else value
    except (TypeError, ValueError):
        raise _Unplain from None
    if (low is not None and number < low) or (high is not None and number > high):
        raise _Unplain
    return number


@dataclass(frozen=True)
class PlainRuntimeParam(RuntimeParam):
    """Converts plain values itself; everything else through typer (pydantic)."""

    descriptor: TypeDescriptor
    leaf: type
    many: bool

    def _coerce_value(self, value: Any, param: _TyperParameter, ctx: _click.Context) -> Any:
        info = self.parameter_info
        try:
            if self.many:
                return [_leaf(self.leaf, v, info.min, info.max) for v in value]
            return _leaf(self.leaf, value, info.min, info.max)
        except _Unplain:
            typer_own = build_runtime_param(self.descriptor)
            return typer_own._coerce_value(value, param=param, ctx=ctx)


def _plain_kind(descriptor: TypeDescriptor) -> tuple[type, bool] | None:
    """(the leaf type, is a list) when this module can convert values of ``descriptor``."""
    annotation, info = descriptor.annotation, descriptor.parameter_info
    many = get_origin(annotation) is list
    leaf = get_args(annotation)[0] if many else annotation
    if leaf not in _PLAIN or descriptor.file_annotation is not None:
        return None
    if info.parser is not None or getattr(info, "click_type", None) is not None or info.clamp:
        return None
    if leaf is Path and any(getattr(info, k, d) != d for k, d in _PATH_DEFAULTS.items()):
        return None
    if descriptor.is_choice:
        return None
    return leaf, many


def _runtime_param(param: _TyperParameter) -> RuntimeParam:
    """``_TyperParameter.get_runtime_param``, plain values first (built once per parameter)."""
    if param._runtime_param is None:
        descriptor = param.type_descriptor
        kind = _plain_kind(descriptor)
        if kind is None:
            param._runtime_param = build_runtime_param(descriptor)
        else:
            param._runtime_param = PlainRuntimeParam(
                descriptor.parameter_info, descriptor.annotation, descriptor, *kind
            )
    return param._runtime_param


def install() -> None:
    """Convert plain values of every typer parameter here (its ``--help`` flag included)."""
    setattr(_TyperParameter, "get_runtime_param", _runtime_param)  # noqa: B010
