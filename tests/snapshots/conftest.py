"""Snapshot tests: real programs on real backends; states checked, processes by pid."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # snap_nodes must import in the launcher and the fork server
    sys.path.insert(0, str(HERE))


@pytest.fixture
def topology(tmp_path: Path) -> Callable[[str], Path]:
    """Write a topology YAML (dedented) to tmp_path and return its path."""

    def write(text: str, name: str = "topo.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write
