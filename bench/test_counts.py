"""Tests per area at two commits (issue 42: no behaviour loses its test).

    .venv/bin/python bench/test_counts.py BASE [HEAD]

Collects each commit's suite (``pytest --collect-only``, in a temporary worktree) and
prints a table of tests per area (the directory under ``tests/``; tests/backends by its
subdirectory), before, after and the difference."""

from __future__ import annotations

import collections
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def area(nodeid: str) -> str:
    """``tests/backends/ssh/test_x.py::t`` -> ``backends/ssh``; ``tests/cli/...`` -> ``cli``."""
    parts = nodeid.split("::")[0].split("/")[1:-1]
    if parts[:1] == ["backends"] and len(parts) > 1:
        return "/".join(parts[:2])
    return parts[0] if parts else "(top)"


def collect(commit: str) -> collections.Counter[str]:
    """Tests per area in ``commit``'s suite."""
    with tempfile.TemporaryDirectory(prefix="topo-counts-") as tmp:
        tree = Path(tmp) / "tree"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "-q", "--detach", str(tree), commit],
            check=True,
        )
        try:
            env = dict(os.environ, PYTHONPATH=str(tree), TOPO_TEST_REPORT=str(Path(tmp) / "d.md"))
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "--collect-only",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    "tests",
                ],
                cwd=tree,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            ).stdout
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True
            )
    counts: collections.Counter[str] = collections.Counter()
    for line in out.splitlines():  # test ids, or "file: count" where -q is given twice
        path, sep, number = line.rpartition(": ")
        if line.startswith("tests/") and "::" in line:
            counts[area(line)] += 1
        elif sep and path.startswith("tests/") and path.endswith(".py") and number.isdigit():
            counts[area(path)] += int(number)
    return counts


def main() -> None:
    base = sys.argv[1]
    head = sys.argv[2] if len(sys.argv) > 2 else "HEAD"
    before, after = collect(base), collect(head)
    print(f"| area | {base} | {head} | change |")
    print("| --- | ---: | ---: | ---: |")
    for name in sorted(set(before) | set(after)):
        b, a = before[name], after[name]
        print(f"| {name} | {b} | {a} | {a - b:+d} |")
    total_b, total_a = sum(before.values()), sum(after.values())
    print(f"| all | {total_b} | {total_a} | {total_a - total_b:+d} |")


if __name__ == "__main__":
    main()
