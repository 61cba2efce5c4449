"""A plug-in backend's own command-line options and its part of ``topo plan``: declared
by the backend (``Backend.options``, ``Backend.placement_text``), given as flags to
``topo run``/``topo plan`` with ``--backend NAME``, refused with exit 1 when wrong.
The plug-in is installed through a real entry point; ``topo`` runs as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bk_plugins import install

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
HELLO = "name: hello\nnodes:\n  hi: {kind: py, target: 'bk_nodes:hello'}\n"


@pytest.fixture
def hello(tmp_path: Path) -> Path:
    path = tmp_path / "hello.yaml"
    path.write_text(HELLO)
    return path


def _topo(tmp_path: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``topo ARGS`` (the console script's module) with the test plug-ins installed."""
    site = install(tmp_path / "site")
    paths = os.pathsep.join([str(ROOT), str(HERE), str(site)])
    env = dict(os.environ, PYTHONPATH=paths, NO_COLOR="1", COLUMNS="200")
    return subprocess.run(
        [sys.executable, "-m", "topo", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )


@pytest.mark.slow
def test_a_plugin_backend_gets_its_options_from_topo_run(tmp_path: Path, hello: Path) -> None:
    out, run_dir = tmp_path / "given.json", tmp_path / "run"
    done = _topo(
        tmp_path,
        *["run", hello, "--backend", "optplug", "--greeting", "hi there", f"--out={out}"],
        *["--times", "3", "--loud", "--run-dir", run_dir, "-q"],
    )
    assert done.returncode == 0, done.stderr
    given = json.loads(out.read_text())
    assert given == {"greeting": "hi there", "out": str(out), "times": 3, "loud": True}
    assert json.loads((run_dir / "status.json").read_text())["backend"] == "optplug"
    assert "hello from hi" in (run_dir / "logs" / "hi.log").read_text()
    # options left out get the constructor's defaults
    done = _topo(tmp_path, "run", hello, "-b", "optplug", "--greeting", "yo", "--out", out, "-q")
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["times"] == 1 and not json.loads(out.read_text())["loud"]


def test_a_plugin_backend_adds_its_placement_to_topo_plan(tmp_path: Path, hello: Path) -> None:
    out = tmp_path / "given.json"
    done = _topo(tmp_path, "plan", hello, "-b", "optplug", "--greeting", "hi", "--out", out)
    assert done.returncode == 0, done.stderr
    assert "program hello" in done.stdout  # the usual plan first
    assert done.stdout.rstrip().endswith("optplug would greet 'hi' in threads: hi")
    assert not out.exists()  # planning makes no backend
    plain = _topo(tmp_path, "plan", hello)
    assert "optplug" not in plain.stdout
    helped = _topo(tmp_path, "run", "-b", "optplug", "--help")
    assert helped.returncode == 0
    assert "Options of --backend optplug" in helped.stdout
    assert "--greeting TEXT" in helped.stdout and "what to write to --out" in helped.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--greeting", "hi", "--out", "o.json", "--colour", "red"],
            "no such option --colour: neither topo run nor --backend optplug takes it (the "
            "backend's options: --greeting, --out, --times, --loud)",
        ),
        (["--out", "o.json"], "--backend optplug needs --greeting TEXT (what to write to --out)"),
        (
            ["--greeting", "hi", "--out", "o.json", "--times", "many"],
            "--times of --backend optplug takes INTEGER, not 'many'",
        ),
        (
            ["--greeting", "hi", "--out", "o.json", "--loud=yes"],
            "--loud of --backend optplug is a flag: it takes no value",
        ),
        (
            ["--greeting", "hi", "--out", "o.json", "--hosts", "h.yaml"],
            "--hosts only applies to --backend ssh or ssh-stand-in (not optplug)",
        ),
    ],
)
def test_a_wrong_option_of_a_plugin_backend_is_refused(
    tmp_path: Path, hello: Path, argv: list[str], message: str
) -> None:
    done = _topo(tmp_path, "run", hello, "-b", "optplug", *argv, "--log-dir", tmp_path / "runs")
    assert done.returncode == 2  # a command-line mistake
    assert f"error: {message}" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "runs").exists()
    assert not (tmp_path / "o.json").exists()


def test_another_backend_refuses_the_plugins_option(tmp_path: Path, hello: Path) -> None:
    for command in ("run", "plan"):
        done = _topo(tmp_path, command, hello, "-b", "threads", "--greeting", "hi")
        assert done.returncode == 2
        assert "error: --greeting only applies to --backend optplug (not threads)" in done.stderr


def test_topos_own_backends_are_entry_points_a_plugin_cannot_replace(tmp_path: Path) -> None:
    """One table: threads, procs, ssh and ray are entry points of topo-launch, beside the
    plug-ins; a plug-in registering ``procs`` too does not replace topo's."""
    code = (
        "from importlib.metadata import entry_points\n"
        "from topo.backends.base import available_backends, get_backend\n"
        "own = {e.name for e in entry_points(group='topo.backends') "
        "if e.dist.name == 'topo-launch'}\n"
        "print(sorted(own), available_backends(), type(get_backend('procs')).__module__)\n"
    )
    install(tmp_path / "site")
    paths = os.pathsep.join([str(ROOT), str(HERE), str(tmp_path / "site")])
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=paths),
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("] ")[0] == "['procs', 'ray', 'slurm', 'ssh', 'threads'"
    assert (
        "'journal', 'optplug', 'procs', 'ray', 'slurm', 'ssh', 'ssh-stand-in', 'subprocs', "
        "'threads'" in done.stdout
    )
    assert done.stdout.rstrip().endswith("topo.backends.procs")
