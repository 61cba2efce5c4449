"""Backend end-to-end tests: real processes, real sockets; orphans checked by pid."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from topo.backends.base import available_backends

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(HERE) not in sys.path:  # bk_nodes must import in the launcher and in the fork server
    sys.path.insert(0, str(HERE))


@pytest.fixture
def topology(tmp_path: Path) -> Callable[[str], Path]:
    """Write a topology YAML (dedented) to tmp_path and return its path."""

    def write(text: str, name: str = "topo.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


NEEDS_HOSTS = {"ssh", "slurm"}  # an inventory; a Slurm allocation


@pytest.fixture(params=[b for b in available_backends() if b not in NEEDS_HOSTS])
def backend(request: pytest.FixtureRequest) -> str:
    """Every registered backend that runs on this machine without options: the built-in
    ones and any installed plugin (ssh, which needs an inventory, has tests/backends/ssh;
    slurm, which needs an allocation, tests/backends/slurm)."""
    return str(request.param)
