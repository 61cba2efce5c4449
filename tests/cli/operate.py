"""Helpers of the operate-runs tests: the real ``topo`` CLI in subprocesses, a detached
run, and the pids of a run (waits: ``topo.testing``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[2]
TICKER = "tests.cli.ticker:Ticker"


def env(cwd: Path | None = None) -> dict[str, str]:
    """The tests' environment: this checkout first on the path, no colours; with ``cwd``
    a run index of that directory's own (``topo ps`` sees only that test's runs)."""
    out = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "200"}
    if cwd is not None:
        out["TOPO_HOME"] = str(cwd / ".topo-home")
    return out


def topo(
    *args: str, cwd: Path, timeout: float = 120, extra: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``topo ARGS`` as a user types it, in ``cwd`` (``extra``: more environment)."""
    return subprocess.run(
        [sys.executable, "-m", "topo", *args],
        cwd=cwd,
        env={**env(cwd), **(extra or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ticker_topology(path: Path, count: int = 2, fail: bool = False) -> Path:
    """A topology of ``count`` tickers (``fail``: they fail at start)."""
    path.write_text(
        textwrap.dedent(
            f"""\
            name: tickers
            nodes:
              ticker:
                target: {TICKER}
                count: {count}
                args: {{name: t, fail: {str(fail).lower()}}}
            """
        )
    )
    return path


def run_detached(cwd: Path, *args: str) -> tuple[str, Path]:
    """``topo run ARGS -d``: the run's id and directory (asserting it came up)."""
    done = topo("run", *args, "-d", cwd=cwd, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    run_id, run_dir = done.stdout.split()
    return run_id, Path(run_dir)


def status(run_dir: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((run_dir / "status.json").read_text())
    return data


def run_pids(run_dir: Path) -> set[int]:
    """The launcher's pid, every node pid this machine has in the record, and every
    process below the launcher now."""
    st = status(run_dir)
    launcher = int(st["launcher"]["pid"])
    pids = {launcher}
    pids |= {int(n["pid"]) for n in st["nodes"] if n.get("pid") and not n.get("host")}
    try:
        pids |= {p.pid for p in psutil.Process(launcher).children(recursive=True)}
    except psutil.NoSuchProcess:
        pass
    return pids
