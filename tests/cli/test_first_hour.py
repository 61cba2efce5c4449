"""What a new user hits in the first hour with ``topo``: each test runs the real command
(a subprocess, real nodes, real Graphviz) and checks one slip that used to be there."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from topo.render.graphviz import PNG_MAX_PX, png_size
from topo.rundir.lines import display_line
from topo.testing import wait_gone

ROOT = Path(__file__).resolve().parents[2]
TOPO = [sys.executable, "-c", "from topo.cli import main; main()"]
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3} ")
NODES = '''
import time

import topo


class Flaky:
    """Prints, then raises; restarted by its group's policy."""

    def run(self) -> None:
        print("flaky says hi", flush=True)
        raise ValueError("boom")


class Busy:
    """Serves until the program stops."""

    def run(self) -> None:
        print("busy is up", flush=True)
        topo.wait_for_stop()


class Loud:
    """Fails with a message longer than a terminal line."""

    def run(self) -> None:
        time.sleep(0.2)
        raise RuntimeError("x" * 150 + " end-of-the-long-message")
'''


def _env() -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1")
    env.pop("COLUMNS", None)
    return env


def _topo(
    *args: str | Path, cwd: Path = ROOT, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TOPO, *map(str, args)],
        capture_output=True,
        text=True,
        env=_env(),
        cwd=cwd,
        timeout=timeout,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A folder with a node module; topologies written next to it find it."""
    (tmp_path / "fh_nodes.py").write_text(NODES)
    return tmp_path


def _write(folder: Path, text: str) -> Path:
    path = folder / "t.yaml"
    path.write_text(textwrap.dedent(text))
    return path


# --- stopping ------------------------------------------------------------------------------


def test_ctrl_c_hint_is_on_the_stopping_line_not_in_the_outcome(project: Path) -> None:
    path = _write(
        project,
        """
        name: busy
        nodes:
          busy: {target: "fh_nodes:Busy", count: 2}
    """,
    )
    proc = subprocess.Popen(
        [*TOPO, "run", str(path), "--no-live", "--log-dir", str(project / "runs")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=project,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "nodes up in" in line:
                break
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, out + err
    stopping = [line for line in out.splitlines() if "stopping:" in line]
    assert stopping and "press Ctrl-C again to kill" in stopping[0], out
    outcome = err.strip().splitlines()[-1]
    assert outcome.startswith("✓ stopped: Ctrl-C — exit 130"), err
    assert "again" not in err


# --- bad input exits 1, a command-line mistake 2 ----------------------------------------------


def test_negative_grace_is_refused_as_a_command_line_mistake(project: Path) -> None:
    path = _write(project, 'name: g\nnodes:\n  busy: {target: "fh_nodes:Busy"}\n')
    result = _topo("run", path, "--grace", "-1", "--log-dir", project / "runs", cwd=project)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--grace" in result.stderr
    assert not (project / "runs").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "examples/topologies/consumer_producers.yaml", "-p", "nope"],
        ["validate", "examples/topologies/consumer_producers.yaml", "-p", "nope=1"],
        ["plan", "examples/topologies/consumer_producers.yaml", "-p", "num_producers=abc"],
        ["graph", "examples/topologies/consumer_producers.yaml", "-p", "work_items=[1"],
    ],
)
def test_bad_input_exits_1_everywhere(argv: list[str]) -> None:
    result = _topo(*argv)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "examples/topologies/consumer_producers.yaml", "--no-such-option"],
        ["graph", "examples/topologies/consumer_producers.yaml", "--dot", "--mermaid"],
        ["validate"],
        ["no-such-command"],
        ["run", "examples/topologies/consumer_producers.yaml", "--log-keep", "many"],
        ["run", "examples/topologies/consumer_producers.yaml", "-b", "no-such-backend"],
    ],
)
def test_a_command_line_mistake_exits_2(argv: list[str]) -> None:
    result = _topo(*argv)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and result.stderr.strip()


def test_readme_and_docs_state_the_exit_codes() -> None:
    """The README says it in short, docs/topology.md ("Errors") and docs/running.md
    ("Exit codes") in full."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "exits 1" in readme and "exits 2" in readme
    errors = (ROOT / "docs" / "topology.md").read_text(encoding="utf-8").split("## Errors")[1]
    assert "exits 1" in errors.split("\n## ")[0] and "exits 2" in errors.split("\n## ")[0]
    codes = (ROOT / "docs" / "running.md").read_text(encoding="utf-8").split("## Exit codes")[1]
    for code in ("| 0 |", "| 1 |", "| 2 |", "| 130 |", "| 143 |"):
        assert code in codes.split("\n## ")[0], code


# --- failures, restarts and log files --------------------------------------------------------


def test_piped_traceback_is_plain_text_at_full_width(project: Path) -> None:
    path = _write(project, 'name: loud\nnodes:\n  loud: {target: "fh_nodes:Loud"}\n')
    result = _topo("run", path, "--no-live", "--log-dir", project / "runs", cwd=project)
    assert result.returncode == 1
    err = result.stderr
    assert "RuntimeError: " + "x" * 150 + " end-of-the-long-message" in err, err
    assert not set("╭╮╰╯│─") & set(err), err
    assert "✗ node loud" in err


@pytest.mark.parametrize("backend", ["threads", "procs"])
def test_restarts_name_the_exception_and_logs_carry_stamps_and_markers(
    project: Path, backend: str
) -> None:
    path = _write(
        project,
        """
        name: flaky
        nodes:
          flaky:
            target: "fh_nodes:Flaky"
            restart: {policy: on-failure, max_restarts: 1, backoff: {initial_s: 0.1}}
    """,
    )
    result = _topo(
        "run", path, "-b", backend, "--no-live", "--log-dir", project / "runs", cwd=project
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "raised ValueError: boom; restart 1/1 in 0.1s" in result.stdout, result.stdout
    assert "flaky | flaky says hi" in result.stdout  # the view shows no timestamps
    (log,) = (project / "runs").glob("flaky-*/logs/flaky.log")
    lines = log.read_text().splitlines()
    assert all(
        STAMP.match(line)
        for line in lines
        if line.strip() and not line.startswith(("Traceback", "  ", "ValueError"))
    ), lines
    said = [line for line in lines if line.endswith("flaky says hi")]
    assert len(said) == 2 and all(STAMP.match(line) for line in said), lines
    markers = [STAMP.sub("", line) for line in lines if "── topo: " in line]
    assert [m.split(" (pid")[0] for m in markers] == [
        "── topo: attempt 1 started",
        "── topo: attempt 1 ended",
        "── topo: attempt 2 started",
        "── topo: attempt 2 ended",
    ], markers
    assert markers[1].endswith("exit code 1 ──"), markers
    pids = {int(m.split("pid ")[1].split(")")[0]) for m in markers}
    assert len(pids) == (2 if backend == "procs" else 1)  # a new process per attempt
    assert not wait_gone(pids - {os.getpid()} if backend == "procs" else [], 15)


def test_display_line_hides_stamps_and_markers() -> None:
    assert display_line("2026-11-30T07:40:01.123 hello [x]") == "hello [x]"
    assert display_line("2026-11-30T07:40:01.123 ── topo: attempt 1 started (pid 1) ──") is None
    assert display_line("no stamp here") == "no stamp here"


# --- graph -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz's dot")
def test_expanded_png_is_bounded_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "big.png"
    result = _topo(
        "graph",
        "examples/topologies/acme_distributed.yaml",
        "-p",
        "num_actors=256",
        "--expand",
        "--png",
        out,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    width, height = png_size(out.read_bytes())
    assert max(width, height) <= PNG_MAX_PX < 32_767
    assert max(width, height) >= PNG_MAX_PX * 0.98  # it was scaled, not clipped
    assert "warning:" in result.stderr and "--svg" in result.stderr


# --- rich markup in user strings -------------------------------------------------------------


def test_markup_in_params_is_shown_as_written(project: Path) -> None:
    path = _write(
        project,
        """
        name: markup
        params:
          tag: {default: "[/bold]x[red]", help: "a [/bold] help [link=x]"}
        nodes:
          busy: {target: "fh_nodes:Busy"}
    """,
    )
    result = _topo("validate", path, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "[/bold]x[red]" in result.stdout
    assert "a [/bold] help [link=x]" in result.stdout
