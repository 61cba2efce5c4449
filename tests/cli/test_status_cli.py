"""``topo status`` of a live run with the real CLI: piped, whole rows (the pid column, a
long last line, the figures with their full names) whatever COLUMNS says and no
trailing spaces; ``--wide`` every column; and it stays light: neither zmq nor topo's
runtime, the IR or rich is imported to print it. ``topo attach`` on an 80-column
terminal shows the return, and the evaluator's closing line whole when the run stops."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from tests.cli.operate import env, run_detached, run_pids, topo
from tests.cli.view_nodes import FINAL
from topo.testing import wait_gone, wait_until

LONG = "evaluated episode " + " ".join(f"word{i}" for i in range(20)) + " END-OF-LINE"
TOPOLOGY = f"""\
name: reporting
nodes:
  learner: {{target: "tests.cli.view_nodes:Idle"}}
  evaluator: {{target: "tests.cli.view_nodes:Evaluator", args: {{line: "{LONG}"}}}}
"""
# Printed at exit by the interpreter that runs `topo status`: the modules it imported.
MODULES_AT_EXIT = (
    "import atexit, sys\n"
    "atexit.register(lambda: print(sorted(sys.modules), file=sys.stderr))\n"
    "from topo.cli import main\nmain()"
)
NOT_IMPORTED = ("zmq", "topo.runtime", "topo.ir", "topo.backends", "topo.supervisor", "rich")


def _status(cwd: Path, *args: str, columns: str = "80") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", MODULES_AT_EXIT, "status", *args],
        cwd=cwd,
        env={**env(cwd), "COLUMNS": columns},
        capture_output=True,
        text=True,
        timeout=60,
    )


def _row(text: str, node: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"{node} "))


@pytest.mark.slow
def test_status_piped_and_wide_shows_whole_rows_and_imports_little(tmp_path: Path) -> None:
    (tmp_path / "reporting.yaml").write_text(TOPOLOGY)
    run_id, run_dir = run_detached(tmp_path, "reporting.yaml", "-b", "procs")
    pids = run_pids(run_dir)
    try:
        wait_until(
            lambda: LONG in _status(tmp_path, run_id).stdout,
            60,
            what="the long line in topo status",
        )
        shown = _status(tmp_path, run_id)
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert all(line == line.rstrip() for line in lines), shown.stdout
        header = next(line for line in lines if line.startswith("node "))
        assert "pid" in header and "uptime" in header and "executable" not in header
        evaluator = _row(shown.stdout, "evaluator")
        assert "mean_return 213.4 · actor_steps" in evaluator and LONG in evaluator
        assert len(evaluator) > 80  # not cut to COLUMNS: a pipe gets whole rows
        imported = set(eval(shown.stderr.strip().splitlines()[-1]))
        heavy = sorted(m for m in imported if m.startswith(NOT_IMPORTED))
        assert heavy == [], heavy
        assert "run " in shown.stderr and ": running" in shown.stderr

        wide = _status(tmp_path, run_id, "--wide")
        assert wide.returncode == 0, wide.stderr
        header = next(line for line in wide.stdout.splitlines() if line.startswith("node "))
        assert "executable" in header and "pid" in header
        assert "learner_steps" in _row(wide.stdout, "evaluator")
    finally:
        stopped = topo("stop", run_id, cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert not wait_gone(pids, 20)


@pytest.mark.slow
def test_attach_shows_the_return_and_the_closing_line_at_80_columns(tmp_path: Path) -> None:
    (tmp_path / "reporting.yaml").write_text(TOPOLOGY)
    run_id, run_dir = run_detached(tmp_path, "reporting.yaml", "-b", "procs")
    pids = run_pids(run_dir)
    e = {**env(tmp_path), "TERM": "xterm-256color"}
    del e["NO_COLOR"], e["COLUMNS"]
    attached = pexpect.spawn(
        sys.executable,
        ["-m", "topo", "attach", run_id],
        cwd=str(tmp_path),
        env=e,
        dimensions=(30, 80),
        encoding="utf-8",
        codec_errors="replace",
        timeout=60,
    )
    try:
        attached.expect("return 213.4")
        stopped = topo("stop", run_id, cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        attached.expect(pexpect.EOF)
        out = " ".join((attached.before or "").split())  # lines wrapped at 80, joined
        assert FINAL in out, out  # whole: wrapped, never cut
    finally:
        attached.close(force=True)
        topo("stop", run_id, "--kill", cwd=tmp_path)  # (ended already, unless this failed)
        assert not wait_gone(pids, 20)
