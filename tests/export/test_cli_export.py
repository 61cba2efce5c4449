"""``topo export BUILDER``: what it writes, and the errors it gives instead of a traceback."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
P = "tests.export.programs"


def _fails(result: Any) -> str:
    assert result.exit_code == 1, result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    return str(result.stderr)


def test_writes_a_valid_file_with_the_schema_line(
    run_topo: Callable[..., Any], tmp_path: Path
) -> None:
    out = tmp_path / "sub" / "agent.yaml"
    out.parent.mkdir()
    result = run_topo("export", f"{P}:consumer_producers", "-p", "num_producers=2", "-o", out)
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    first = text.splitlines()[0]
    assert first.startswith("# yaml-language-server: $schema=")
    schema = (out.parent / first.split("=", 1)[1]).resolve()
    assert schema.name == "topology.schema.json" and schema.is_file()
    assert "name: consumer_producers" in text and "count: ${num_producers}" in text
    assert "num_producers: 2" in text
    assert "num_producers=2" in text  # the header says how it was built
    checked = run_topo("validate", out, "-q")
    assert checked.exit_code == 0, checked.stderr


def test_stdout_and_the_seed(run_topo: Callable[..., Any]) -> None:
    result = run_topo("export", f"{P}:consumer_producers", "--seed", "5")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("# yaml-language-server: $schema=file://")
    assert "params:\n  seed: 5\n" in result.stdout


def test_split_groups_are_reported(run_topo: Callable[..., Any]) -> None:
    result = run_topo("export", f"{P}:everything")
    assert result.exit_code == 0, result.stderr
    assert "group 'counter'" in result.stderr and "group 'steps_limiter'" in result.stderr


def test_closures_are_refused_naming_every_node(run_topo: Callable[..., Any]) -> None:
    err = _fails(run_topo("export", f"{P}:with_closure"))
    assert "node actor/0 (group 'actor') and 2 more node(s) of its group" in err
    assert "make build_actor a module-level function or class" in err
    assert "node other:" in err and "lambda" in err  # the second problem is reported too
    assert "replace the lambda with a module-level function" in err


def test_pickled_arguments_are_refused(run_topo: Callable[..., Any]) -> None:
    err = _fails(run_topo("export", f"{P}:with_config"))
    assert "argument 'cfg' is <pickled Config" in err
    assert "pass plain values (numbers, strings, lists, dicts)" in err


def test_replicas_that_differ_in_settings_are_refused(run_topo: Callable[..., Any]) -> None:
    err = _fails(run_topo("export", f"{P}:with_mixed"))
    assert "node actor/1 (group 'actor'): has other rpc settings than actor/0" in err
    assert "node my_learners/1 (group 'my learners'): passes the arguments (replay)" in err
    assert "2 errors" in err


def test_prng_keys_become_seed_keys(run_topo: Callable[..., Any], tmp_path: Path) -> None:
    out = tmp_path / "keys.yaml"
    result = run_topo("export", f"{P}:with_keys", "-o", out)
    assert result.exit_code == 0, result.stderr
    text = out.read_text()
    assert "random_key: ${seed.key}" in text
    assert "# PRNG keys are written ${seed.key}" in text
    assert "keyed.random_key" in result.stderr and "${seed.key}" in result.stderr
    plan = run_topo("plan", out)
    assert plan.exit_code == 0, plan.stderr


@pytest.mark.parametrize(
    ("builder", "message"),
    [
        ("no_colon_here", "'no_colon_here' is not a builder path"),
        ("tests.export.no_such_module:make", "cannot import tests.export.no_such_module"),
        (f"{P}:no_such_function", f"{P} has no attribute 'no_such_function'"),
        (f"{P}:RESOURCES", f"{P}:RESOURCES is not callable"),
        (f"{P}:not_a_program", "returned dict, not a Launchpad program"),
        (f"{P}:raising", "raised ValueError: num_actors must be positive"),
    ],
)
def test_bad_builders(run_topo: Callable[..., Any], builder: str, message: str) -> None:
    assert message in _fails(run_topo("export", builder))


def test_builder_params_are_yaml_scalars(run_topo: Callable[..., Any]) -> None:
    err = _fails(run_topo("export", f"{P}:raising", "-p", "fail=true"))
    assert "raising(fail=True)" in err
    result = run_topo("export", f"{P}:raising", "-p", "fail=false")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("# yaml-language-server")  # the builder's print went to stderr
    assert "building the program" in result.stderr


def test_the_installed_command(tmp_path: Path) -> None:
    """The real console script, in a fresh process, from the repository root."""
    topo = Path(sys.executable).parent / "topo"
    proc = subprocess.run(
        [str(topo), "export", f"{P}:with_closure"], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 1
    assert "error: node actor/0" in proc.stderr and "Traceback" not in proc.stderr
