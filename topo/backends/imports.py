"""Where node targets are imported from, checked before anything starts: the launcher's
entry to :mod:`topo.targets`, the one importer ``topo validate --check-imports`` shares."""

from __future__ import annotations

from topo.ir import Program
from topo.targets import prepare_all


def prepare_imports(program: Program, modules: list[str]) -> list[str]:
    """Put the import roots on ``sys.path``; return a message per module still missing."""
    return prepare_all(program.source, modules)
