"""The ``topo apply`` suite: real programs changed while they run, on every backend."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # apply_nodes must import in the launcher and in the fork server
    sys.path.insert(0, str(HERE))


@pytest.fixture
def topology(tmp_path: Path) -> Callable[..., Path]:
    """``topology(text, name)``: write a topology YAML (dedented) to tmp_path."""

    def write(text: str, name: str = "topo.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write
