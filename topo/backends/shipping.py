"""What shipping a working tree to other machines leaves behind (``--ship`` on ssh and
ray): version control, virtual environments, caches, build output and run directories."""

from __future__ import annotations

SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".venv",
        "venv",
        "env",
        "__pycache__",
        ".mypy_cache",
        ".ruff_cache",
        ".pytest_cache",
        ".hypothesis",
        "node_modules",
        "runs",
        "build",
        "dist",
    }
)
SKIP_SUFFIXES = (".pyc", ".pyo")
