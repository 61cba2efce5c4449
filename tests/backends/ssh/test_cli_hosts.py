"""``topo plan/run --backend ssh --hosts H``: the placement printed, and every wrong
combination or bad inventory refused with exit 1 before anything starts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from bk_plugins import install

ROOT = Path(__file__).resolve().parents[3]
BACKENDS = ROOT / "tests" / "backends"
TOPOLOGY = """
name: spread
nodes:
  learner: {target: m:L, resources: {host_labels: [gpu]}}
  actor: {target: m:A, count: 4}
"""
HOSTS = """
defaults: {known_hosts: known_hosts, user: root}
hosts:
  h1: {address: 10.213.0.11, labels: [gpu], capacity: 2}
  h2: {address: 10.213.0.12}
"""


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    """A topology and an inventory that places it."""
    (tmp_path / "known_hosts").write_text("")
    topology, hosts = tmp_path / "spread.yaml", tmp_path / "hosts.yaml"
    topology.write_text(textwrap.dedent(TOPOLOGY).lstrip())
    hosts.write_text(textwrap.dedent(HOSTS).lstrip())
    return topology, hosts


def test_plan_prints_the_placement(run_topo: Any, files: tuple[Path, Path]) -> None:
    topology, hosts = files
    result = run_topo("plan", topology, "--backend", "ssh", "--hosts", hosts)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "program spread" in out and "exe actor/3" in out  # the usual plan first
    placement = out[out.index("placement on 2 host(s)") :].splitlines()
    assert placement[1:] == [
        "  host h1  root@10.213.0.11  labels gpu  capacity 2  — 2 executables",
        "    learner",
        "    actor/1",
        "  host h2  root@10.213.0.12  — 3 executables",
        "    actor/0",
        "    actor/2",
        "    actor/3",
    ]


def test_plan_of_an_impossible_placement(run_topo: Any, files: tuple[Path, Path]) -> None:
    topology, hosts = files
    hosts.write_text(hosts.read_text().replace("labels: [gpu], ", ""))
    result = run_topo("plan", topology, "-b", "ssh", "--hosts", hosts)
    assert result.exit_code == 1
    assert (
        f"{topology}:3:3: error: group 'learner' needs a host labelled gpu, and no host has it"
        in result.stderr
    )
    assert "placement on" not in result.stdout and "Traceback" not in result.output


def test_plan_with_a_bad_inventory(run_topo: Any, files: tuple[Path, Path]) -> None:
    topology, hosts = files
    hosts.write_text(hosts.read_text().replace("capacity: 2", "capasity: 2"))
    result = run_topo("plan", topology, "-b", "ssh", "--hosts", hosts)
    assert result.exit_code == 1
    assert f"{hosts}:3:45: error: unknown key 'capasity' in 'hosts.h1'" in result.stderr
    assert "did you mean 'capacity'?" in result.stderr


def test_plan_json_checks_the_placement(run_topo: Any, files: tuple[Path, Path]) -> None:
    topology, hosts = files
    result = run_topo("plan", topology, "--json", "-b", "ssh", "--hosts", hosts)
    assert result.exit_code == 0 and json.loads(result.stdout)["name"] == "spread"
    hosts.write_text(hosts.read_text().replace("labels: [gpu], ", ""))
    failed = run_topo("plan", topology, "--json", "-b", "ssh", "--hosts", hosts)
    assert failed.exit_code == 1 and failed.stdout == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--hosts", "{hosts}"], "--hosts only applies to --backend ssh; name it with --backend"),
        (
            ["-b", "procs", "--hosts", "{hosts}"],
            "--hosts only applies to --backend ssh (not procs)",
        ),
        (["-b", "ssh"], "--backend ssh needs --hosts FILE (the inventory of hosts to run on)"),
        (["-b", "ssh", "--hosts"], "--hosts of --backend ssh needs a value (FILE)"),
        (["-b", "nope"], "unknown backend 'nope'; available: procs, ray, slurm, ssh, threads"),
    ],
)
def test_plan_refuses_wrong_combinations(
    run_topo: Any, files: tuple[Path, Path], argv: list[str], message: str
) -> None:
    topology, hosts = files
    result = run_topo("plan", topology, *[a.format(hosts=hosts) for a in argv])
    assert result.exit_code == 2 and message in result.stderr  # a command-line mistake
    assert result.stdout == ""


def test_plan_with_another_backend_is_the_usual_plan(
    run_topo: Any, files: tuple[Path, Path]
) -> None:
    topology, _ = files
    plain, procs = run_topo("plan", topology), run_topo("plan", topology, "-b", "procs")
    assert plain.exit_code == procs.exit_code == 0
    assert procs.stdout == plain.stdout and "placement" not in plain.stdout


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--hosts", "{hosts}"], "--hosts only applies to --backend ssh (not procs)"),
        (["-b", "threads", "--ship"], "--ship only applies to --backend ray or ssh (not threads)"),
        (["-b", "ray", "--hosts", "{hosts}"], "--hosts only applies to --backend ssh (not ray)"),
        (["-b", "ssh", "--ship"], "--backend ssh needs --hosts FILE"),
    ],
)
def test_run_refuses_wrong_combinations(
    run_topo: Any, files: tuple[Path, Path], tmp_path: Path, argv: list[str], message: str
) -> None:
    topology, hosts = files
    runs = tmp_path / "runs"
    argv = [a.format(hosts=hosts) for a in argv]
    result = run_topo("run", topology, "--log-dir", runs, *argv)
    assert result.exit_code == 2 and message in result.stderr  # a command-line mistake
    assert not runs.exists()


def test_run_passes_the_options_and_reports_a_bad_inventory(
    run_topo: Any, files: tuple[Path, Path], tmp_path: Path
) -> None:
    """``--hosts`` and ``--ship`` reach the constructor of a backend declaring them (a
    stand-in for ssh, registered as a plug-in, that stops after reading the inventory);
    the real ssh backend reports a bad inventory before anything starts."""
    topology, hosts = files
    runs = tmp_path / "runs"
    site = install(tmp_path / "site")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(BACKENDS), str(site)]))
    for extra, ship in ([["--ship"], True], [[], False]):
        argv = [sys.executable, "-m", "topo", "run", str(topology), "-b", "ssh-stand-in"]
        argv += ["--hosts", str(hosts), *extra, "--log-dir", str(runs)]
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 1, done.stderr
        assert f"error: stand-in: 2 hosts read from hosts.yaml (ship={ship})" in done.stderr
    hosts.write_text(hosts.read_text().replace("known_hosts, ", "missing_kh, "))
    result = run_topo("run", topology, "-b", "ssh", "--hosts", hosts, "--log-dir", runs)
    assert result.exit_code == 1
    assert f"{hosts}:1:25: error: known_hosts: no such file missing_kh" in result.stderr
    assert "Traceback" not in result.output and not runs.exists()


def test_plan_needs_no_ssh_library(files: tuple[Path, Path]) -> None:
    """Placement is pure: ``topo plan --backend ssh`` runs with asyncssh made unimportable."""
    topology, hosts = files
    code = (
        "import sys; sys.modules['asyncssh'] = None\n"
        "from topo.cli import main\n"
        f"sys.argv = ['topo', 'plan', {str(topology)!r}, '-b', 'ssh', '--hosts', {str(hosts)!r}]\n"
        "main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=str(ROOT), NO_COLOR="1"),
    )
    assert done.returncode == 0, done.stderr
    assert "placement on 2 host(s)" in done.stdout
