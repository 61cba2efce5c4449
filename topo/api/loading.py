"""``load``: a topology file loaded, interpolated and compiled (the one load path of the
API and every CLI command)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from topo.diagnostics import Diagnostic
from topo.ir import Program

if TYPE_CHECKING:
    from topo.loader import LoadedSpec

ProgramSource = Program | str | Path | Callable[[], Program]


def overrides(params: Mapping[str, Any] | Sequence[str] | None) -> list[str]:
    """``params`` as ``-p`` texts (``{"num_actors": 8}`` -> ``["num_actors=8"]``; values
    that are not text written as JSON)."""
    if params is None:
        return []
    if isinstance(params, Mapping):
        return [f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in params.items()]
    return list(params)


class Loaded:
    """A loaded topology: the compiled ``program`` and, made when first asked for, the
    YAML text the run directory keeps as ``topology.yaml``."""

    def __init__(
        self, program: Program, spec: LoadedSpec, warnings: list[Diagnostic] | None = None
    ) -> None:
        self.program = program
        self.spec = spec  # what the file said: parameters with their help and overrides
        self.warnings = warnings or []  # e.g. a node nothing reaches (--check-imports)

    @functools.cached_property
    def yaml_text(self) -> str:
        """The topology as it runs, as YAML: the file (its bases merged in), each ``-p``
        value written as its parameter's default (``topo.loader.saved``)."""
        from topo.loader.saved import saved_yaml

        return saved_yaml(self.spec)


def load(
    path: str | Path,
    params: Mapping[str, Any] | Sequence[str] | None = None,
    *,
    check_imports: bool = False,
    carried: Sequence[str] | None = None,
) -> Loaded:
    """Load, interpolate and compile a topology file (the one load path of the API and
    every CLI command).

    ``params`` are overrides (``{"num_actors": 8}`` or ``["num_actors=8"]``); with
    ``check_imports`` every target must import. ``carried``: ``-p`` values from before
    (a running program's) that ``params`` change by name; one the file does not declare
    is dropped (``spec.dropped``). Raises ``topo.diagnostics.TopoError`` on a bad file."""
    from topo.compile import compile_spec
    from topo.loader import load_spec

    loaded = load_spec(Path(path), overrides(params), list(carried or []))
    warnings: list[Diagnostic] = []
    program = compile_spec(loaded, check_imports=check_imports, warnings=warnings)
    return Loaded(program, loaded, warnings)
