"""Where node targets are imported from, checked before anything starts: the launcher's
entry to :mod:`topo.targets`, the one importer ``topo validate --check-imports`` shares."""

from __future__ import annotations

from topo.ir import Program
from topo.targets import prepare


def prepare_imports(program: Program, modules: list[str]) -> dict[str, str]:
    """Put the import roots on ``sys.path``; return module -> message for each module that
    still cannot be imported."""
    problems: dict[str, str] = {}
    for module in modules:
        why = prepare(program.source, module)
        if why is not None:
            problems[module] = f"cannot import {module!r}: {why}"
    return problems
