"""Calling a Launchpad program builder (``pkg.mod:make_program``) and compiling what it
returns, with every failure a :class:`TopoError` for the user (no traceback)."""

from __future__ import annotations

import dataclasses
import importlib
import traceback
from collections.abc import Mapping
from typing import Any

from topo.diagnostics import TopoError
from topo.launchpad.program import Program as LpProgram
from topo.launchpad.translate import Compiled, ProgramError, compile_program
from topo.targets import parse_target, prepare


def load_builder(path: str) -> Any:
    """The callable named by ``pkg.mod:function``."""
    try:
        module_name, attr = parse_target(path)
    except ValueError:
        raise TopoError.one(
            f"{path!r} is not a builder path",
            hint="write package.module:function, e.g. examples.launchpad.consumer_producers:"
            "make_program",
        ) from None
    prepare(None, module_name)  # the current directory first, as `python -m` does
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        missing = isinstance(exc, ModuleNotFoundError) and module_name.startswith(exc.name or "?")
        raise TopoError.one(
            f"cannot import {module_name}: {type(exc).__name__}: {exc}",
            hint="run topo export from the directory that holds the package, or install it"
            if missing
            else _last_frame(exc),
        ) from None
    for part in attr.split("."):
        found = getattr(obj, part, None)
        if found is None:
            names = [n for n in dir(obj) if not n.startswith("_")]
            raise TopoError.one(
                f"{module_name} has no attribute {attr!r}",
                hint=f"names in {module_name}: {', '.join(names[:12])}" if names else None,
            )
        obj = found
    if not callable(obj):
        raise TopoError.one(f"{path} is not callable: it is {type(obj).__name__}")
    return obj


def build_program(path: str, params: Mapping[str, Any], *, seed: int = 0) -> Compiled:
    """Call the builder at ``path`` with ``params`` as keyword arguments; the compiled
    program it returns (a ``topo.launchpad.Program``)."""
    builder = load_builder(path)
    try:
        program = builder(**params)
    except Exception as exc:
        raise TopoError.one(
            f"{path}({_call(params)}) raised {type(exc).__name__}: {exc}",
            hint=_last_frame(exc),
        ) from None
    if not isinstance(program, LpProgram):
        raise TopoError.one(
            f"{path}({_call(params)}) returned {type(program).__name__}, not a Launchpad program",
            hint="the builder must return the lp.Program it built (import topo.launchpad as lp)",
        )
    try:
        return compile_program(program, seed=seed)
    except ProgramError as exc:  # at the builder's add_node calls, shown with the line
        raise TopoError(
            [dataclasses.replace(d, message=f"{path}: {d.message}") for d in exc.diagnostics]
        ) from None


def _call(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in params.items())


def _last_frame(exc: BaseException) -> str | None:
    """``at file:line in function`` of the innermost frame, for the hint."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if not f.filename.startswith("<")]
    if not frames:
        return None
    f = frames[-1]
    return f"at {f.filename}:{f.lineno} in {f.name}"
