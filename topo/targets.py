"""The one importer of ``package.module:attribute`` targets, used by compile checks and run.

Targets resolve from the current directory (as with ``python -m``) and, for a target not
importable from there, from the nearest folder above the topology file that holds its
top-level package -- so ``topo run path/to/project/x.yaml`` and ``topo validate
--check-imports`` work from anywhere, the way docker compose resolves paths from the
compose file. ``topo validate --check-imports`` and ``topo run`` go through the same code,
so they agree on what imports.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import inspect
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_DOTTED = r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
TARGET_PATTERN = rf"^{_DOTTED}:{_DOTTED}$"


class TargetError(Exception):
    """A target that cannot be imported; the message is for users (no traceback)."""


def parse_target(target: str) -> tuple[str, str]:
    """``'pkg.mod:Class.attr'`` -> ``('pkg.mod', 'Class.attr')``; ValueError when malformed."""
    if not re.match(TARGET_PATTERN, target):
        raise ValueError(f"{target!r} is not of the form 'package.module:attribute'")
    module, _, attr = target.partition(":")
    return module, attr


def _findable(module: str) -> str | None:
    """None if ``module`` can be found without running it, else why not."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return f"no module named {module!r}"
    except (ImportError, ValueError) as exc:
        return str(exc)
    except Exception as exc:  # a parent package's __init__ raised
        return f"importing its package raised {type(exc).__name__}: {exc}"
    return None if spec is not None else f"no module named {module!r}"


def _add_path(path: str) -> None:
    if path not in sys.path:
        sys.path.insert(0, path)
        importlib.invalidate_caches()


def _on_disk(folder: Path, module: str) -> bool:
    """Whether ``folder`` holds ``module`` as a file or a package directory."""
    base = folder.joinpath(*module.split("."))
    return base.with_suffix(".py").is_file() or base.is_dir()


def _folders(source: str | None) -> list[Path]:
    if not source:
        return []
    start = Path(source).resolve().parent
    return [start, *start.parents]


def _forget_namespace(top: str) -> None:
    """Drop an already imported namespace package ``top`` (dm-haiku installs a top-level
    ``examples`` one) so the project's regular package of that name is found instead."""
    stale = sys.modules.get(top)
    if stale is not None and getattr(stale, "__file__", None) is None:
        for name in [m for m in sys.modules if m == top or m.startswith(top + ".")]:
            del sys.modules[name]


def prepare(source: str | None, module: str) -> str | None:
    """Put the import roots of ``module`` on ``sys.path`` (the cwd, then the nearest folder
    above the topology file ``source`` holding its top-level package); None when it can be
    imported, else a message saying why not."""
    _add_path(os.getcwd())
    if _findable(module) is None:
        return None
    top = module.split(".")[0]
    for folder in _folders(source):
        if _on_disk(folder, top):
            _add_path(str(folder))
            _forget_namespace(top)
            break
    why = _findable(module)
    if why is None:
        return None
    holders = [f for f in [Path.cwd(), *_folders(source)] if _on_disk(f, module)]
    if not holders:
        return why
    return (
        f"{why}, although {module!r} is in {holders[0]}; targets resolve from the current "
        f"directory ({os.getcwd()}) and the folders above the topology file: run topo from "
        "the project root or add it to PYTHONPATH"
    )


def import_roots(source: str | None, modules: list[str]) -> list[Path]:
    """The folders ``modules`` are found in on disk, as :func:`prepare` looks for them: the
    current directory when it holds a module's top-level package, else the nearest folder
    above the topology file ``source`` that does; once each, the current directory first.
    A module in neither (an installed package) adds none. What a machine that imports the
    targets elsewhere (an ssh host) needs on its path to find them as this one does."""
    cwd = Path.cwd()
    roots: list[Path] = []
    for module in modules:
        top = module.split(".")[0]
        found = next((f for f in [cwd, *_folders(source)] if _on_disk(f, top)), None)
        if found is not None and found not in roots:
            roots.append(found)
    return sorted(roots, key=lambda f: f != cwd)


def prepare_all(source: str | None, modules: list[str]) -> list[str]:
    """:func:`prepare` for every module; one message per module that cannot be imported."""
    problems = []
    for module in modules:
        why = prepare(source, module)
        if why is not None:
            problems.append(f"cannot import {module!r}: {why}")
    return problems


def import_target(target: str, source: str | None = None) -> Any:
    """Import ``target`` the way ``topo run`` does and return the attribute.

    Raises :class:`TargetError` with a message for users when the module is missing,
    raises while importing, or lacks the attribute."""
    module_name, _, attr_path = target.partition(":")
    why = prepare(source, module_name)
    if why is not None:
        raise TargetError(f"cannot import {target!r}: {why}")
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:  # importing user code may raise anything
        raise TargetError(
            f"importing {target!r} raised {type(exc).__name__}: {exc}{_raised_at(exc)}"
        ) from exc
    for part in attr_path.split(".") if attr_path else ():
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise TargetError(f"module {module_name!r} has no attribute {attr_path!r}") from None
    return obj


@dataclass(frozen=True)
class TargetInfo:
    """What the checks before a run need to know of an imported target, in plain data (a
    fork server that imported it sends this to the launcher, which then need not import
    it): whether it can be called, its type, whether it is a class with a ``run()``, and
    its parameters as (name, kind, has a default); ``params`` None when it has no
    signature Python can read (a builtin)."""

    can_call: bool
    type_name: str
    is_class: bool
    has_run: bool
    params: tuple[tuple[str, str, bool], ...] | None

    @classmethod
    def of(cls, obj: Any) -> TargetInfo:
        """Describe ``obj``."""
        try:
            signature = inspect.signature(obj)
            params: tuple[tuple[str, str, bool], ...] | None = tuple(
                (p.name, p.kind.name, p.default is not p.empty)
                for p in signature.parameters.values()
            )
        except (TypeError, ValueError):  # builtins and C callables without a signature
            params = None
        return cls(
            callable(obj),
            type(obj).__name__,
            inspect.isclass(obj),
            callable(getattr(obj, "run", None)),
            params,
        )

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TargetInfo:
        """The inverse of ``dataclasses.asdict`` through JSON."""
        params = data["params"]
        return cls(
            data["can_call"],
            data["type_name"],
            data["is_class"],
            data["has_run"],
            None if params is None else tuple((n, k, bool(d)) for n, k, d in params),
        )


def describe_targets(targets: list[str], source: str | None) -> dict[str, Any]:
    """target -> its ``TargetInfo`` as a dict, or the message of its ``TargetError``:
    what a fork server answers to the launcher's check (plain data, for JSON)."""
    out: dict[str, Any] = {}
    for target in targets:
        try:
            out[target] = dataclasses.asdict(TargetInfo.of(import_target(target, source)))
        except TargetError as exc:
            out[target] = str(exc)
    return out


def _raised_at(exc: BaseException) -> str:
    """`` (at file:line)``: where user code raised ``exc`` (its innermost frame outside
    the import machinery), or "" when there is none."""
    import traceback

    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith("<frozen") and f.filename != __file__
    ]
    if isinstance(exc, SyntaxError) and exc.filename:
        return f" (at {exc.filename}:{exc.lineno})"
    return f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""


def load_target(target: str) -> Any:
    """Import an already prepared target (inside a running node): errors propagate as is."""
    module_name, _, attr_path = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr_path.split(".") if attr_path else ():
        obj = getattr(obj, part)
    return obj
