"""Helpers shared by the renderer tests (not named conftest: see tests/runtime/rt_support.py)."""

from __future__ import annotations

import shutil

import pytest

needs_dot = pytest.mark.skipif(
    shutil.which("dot") is None,
    reason="Graphviz `dot` is not installed (apt-get install graphviz)",
)
