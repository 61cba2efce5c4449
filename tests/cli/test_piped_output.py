"""Piped, no command pads its lines with spaces: rich pads table cells, titles and
panels to their width, and ``topo.cli.consoles`` drops what ends a line (``grep``,
``awk`` and diffs read pipes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "topologies").glob("*.yaml"))
SMALL = ROOT / "examples" / "topologies" / "consumer_producers.yaml"


def _piped(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("COLUMNS", None)
    return subprocess.run(
        [sys.executable, "-m", "topo", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", str(SMALL)],
        ["validate", str(ROOT / "examples/topologies/acme_distributed.yaml")],
        ["plan", str(SMALL)],
        ["graph", str(SMALL)],
        ["diff", str(SMALL), str(SMALL), "-p", "num_producers=2"],
        ["schema", "--path"],
        ["-h"],
        ["run", "-h"],
    ],
    ids=lambda argv: " ".join(Path(a).name for a in argv),
)
def test_piped_lines_end_without_spaces(argv: list[str]) -> None:
    done = _piped(*argv)
    assert done.returncode in (0, 1), done.stderr  # (diff: 1 when the programs differ)
    lines = done.stdout.splitlines()
    assert lines, done.stderr
    padded = [line for line in lines if line != line.rstrip()]
    assert padded == [], padded[:3]
    assert all(line == line.rstrip() for line in done.stderr.splitlines())


def test_a_piped_table_is_as_wide_as_its_content() -> None:
    lines = _piped("validate", str(SMALL)).stdout.splitlines()
    title = next(line for line in lines if line.startswith("parameters"))
    assert title == "parameters"  # not centred or padded to the table's width
    row = next(line for line in lines if "num_producers" in line)
    assert row.endswith("Number of producer nodes.")
