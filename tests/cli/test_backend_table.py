"""The table of backends (entry points) is read only by commands that pick a backend:
``topo validate`` and a ``topo plan`` without ``--backend`` never pay for the scan."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "topologies" / "consumer_producers.yaml"

# Runs a topo command in this process, then says whether the backend table was read.
READ = """
import sys
sys.argv = ["topo", *sys.argv[1:]]
from topo.cli import main
try:
    main()
except SystemExit as exc:
    assert not exc.code, exc.code
base = sys.modules.get("topo.backends.base")
print("TABLE", bool(base and base._table.cache_info().currsize))
"""


@pytest.mark.parametrize(
    ("argv", "read"),
    [
        (["validate", str(EXAMPLE)], False),
        (["plan", str(EXAMPLE)], False),
        (["plan", str(EXAMPLE), "-b", "procs"], True),
    ],
)
def test_only_commands_naming_a_backend_read_the_table(argv: list[str], read: bool) -> None:
    done = subprocess.run(
        [sys.executable, "-c", READ, *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"TABLE {read}"
