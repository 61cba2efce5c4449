"""The suite's own plumbing (tests/scheduling.py): which tests share the machine's unit,
and the record every run leaves (durations, and failures as they happen)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.scheduling import on_the_machine, unit_of

ROOT = Path(__file__).resolve().parent.parent


def test_the_machine_unit_is_known_by_the_test_id() -> None:
    assert on_the_machine("tests/backends/ssh/test_ssh_run.py::test_x")
    assert on_the_machine("tests/backends/ray/test_ray_backend.py::test_x")
    assert on_the_machine("tests/cli/test_run_checks.py::test_x[ray]")
    assert on_the_machine("tests/examples/test_e.py::test_x[acme-ssh-1]")
    assert not on_the_machine("tests/cli/test_run_checks.py::test_x[procs]")
    assert not on_the_machine("tests/backends/test_seams.py::test_x[rayleigh]")


def test_a_run_records_its_slowest_tests_and_each_failure_as_it_happens(tmp_path: Path) -> None:
    (tmp_path / "test_two.py").write_text(
        "import sys\n"
        "def test_fine():\n    pass\n"
        "def test_broken():\n"
        "    print('said on stderr', file=sys.stderr)\n"
        "    assert 1 + 1 == 3, 'arithmetic'\n"
    )
    report = tmp_path / "out" / "durations.md"
    env = dict(os.environ, PYTHONPATH=str(ROOT), TOPO_TEST_REPORT=str(report))
    plugins = ["-p", "tests.scheduling", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "-c", os.devnull, str(tmp_path / "test_two.py")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    record = report.read_text()
    assert "2 tests in" in record and "test_two.py::test_broken | failed" in record, record
    failures = (report.parent / "failures.txt").read_text()
    assert "=== test_two.py::test_broken (call," in failures, failures
    assert "arithmetic" in failures and "said on stderr" in failures, failures
    assert "test_fine" not in failures


def test_the_slurm_tests_are_one_unit_of_their_own() -> None:
    slurm = "tests/backends/slurm/test_slurm_cluster.py::test_x"
    assert unit_of(slurm) == unit_of("tests/backends/slurm/test_other.py::test_y") == "slurm"
    assert unit_of("tests/backends/ssh/test_ssh_run.py::test_x") == "ssh"
    assert unit_of("tests/cli/test_run_checks.py::test_x[ray]") == "ray"
    assert unit_of("tests/backends/ray/test_ray_backend.py::test_x") == "ray"
    assert unit_of("tests/cli/test_run_checks.py::test_x[procs]").startswith("tests/cli/")
    assert not on_the_machine(slurm)


def test_the_slow_tests_are_handed_out_before_the_quick_ones(tmp_path: Path) -> None:
    (tmp_path / "test_mixed.py").write_text(
        "import pytest\n"
        "def test_quick_a():\n    pass\n"
        "@pytest.mark.slow\ndef test_slow_b():\n    pass\n"
        "def test_quick_c():\n    pass\n"
        "@pytest.mark.slow\ndef test_slow_d():\n    pass\n"
    )
    plugins = ["-p", "tests.scheduling", "-p", "no:cacheprovider", "-c", os.devnull]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *plugins, "--collect-only", "-q", "test_mixed.py"],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    ids = [line.split("::")[-1] for line in done.stdout.splitlines() if "::" in line]
    assert ids == ["test_slow_b", "test_slow_d", "test_quick_a", "test_quick_c"], done.stdout
