"""``topo validate / plan / schema`` through the typer app and through a real subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from topo.compile import compile_spec
from topo.ir import loads
from topo.loader import load_spec
from topo.loader.schema import schema_text

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "topologies").glob("*.yaml"))
SCHEMA = ROOT / "schemas" / "topology.schema.json"  # the one schema file
TOPO = ROOT / ".venv" / "bin" / "topo"
POSITION = re.compile(r"\S+\.yaml:\d+:\d+: error: ")


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_validate_examples(run_topo: Any, example: Path) -> None:
    result = run_topo("validate", example)
    assert result.exit_code == 0, result.output
    program = compile_spec(load_spec(example))
    assert f"program {program.name}" in result.output
    assert f"{len(program.nodes)} nodes in {len(program.executables)} processes" in result.output
    assert "groups" in result.output


def test_validate_quiet_prints_nothing(run_topo: Any) -> None:
    result = run_topo("validate", "-q", EXAMPLES[0])
    assert result.exit_code == 0 and result.output == ""


def test_validate_with_overrides(run_topo: Any) -> None:
    path = ROOT / "examples/topologies/consumer_producers.yaml"
    result = run_topo("validate", path, "-p", "num_producers=7")
    assert result.exit_code == 0, result.output
    assert "8 nodes in 8 processes" in result.output


def test_acme_check_through_the_cli(run_topo: Any) -> None:
    path = ROOT / "examples/topologies/acme_distributed.yaml"
    colocate = "colocate_learner_and_replay=true"
    result = run_topo("validate", path, "-p", colocate, "-p", "num_learners=2")
    assert result.exit_code == 1
    line = path.read_text().splitlines().index("  - name: learner_replay") + 1
    assert f"{path}:{line}:3: error: 'learner' is thread-colocated with replay" in result.stderr
    assert f"{line} |   - name: learner_replay" in result.stderr  # the snippet with a caret
    assert "hint: set the secondary count to 0" in result.stderr
    assert run_topo("validate", "-q", path, "-p", colocate, "-p", "num_learners=1").exit_code == 0


def test_int_param_given_abc_through_the_cli(run_topo: Any) -> None:
    result = run_topo("validate", EXAMPLES[0], "-p", "num_actors=abc")
    assert result.exit_code == 1
    assert "error: -p num_actors=abc: expected int, got str 'abc'" in result.stderr
    assert "Traceback" not in result.output


def test_error_output_names_file_line_col_with_snippet(run_topo: Any, write_topo: Any) -> None:
    path = write_topo("name: t\nnodes:\n  a:\n    target: m:C\n    cuont: 3\n")
    result = run_topo("validate", path)
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert lines[0] == f"{path}:5:5: error: unknown key 'cuont' in group 'a'"
    assert lines[1].endswith("5 |     cuont: 3")
    assert lines[2].index("^") == lines[1].index("cuont")
    assert lines[3].strip() == "hint: did you mean 'count'?"


def test_several_errors_are_all_reported(run_topo: Any, write_topo: Any) -> None:
    path = write_topo("name: t\nnodes:\n  a: {target: m:C, cuont: 1}\n  b: {target: mC}\n")
    result = run_topo("validate", path)
    assert result.exit_code == 1
    assert len(POSITION.findall(result.stderr)) == 2
    assert "2 errors" in result.stderr


def test_validate_never_imports_targets(run_topo: Any, write_topo: Any) -> None:
    path = write_topo("name: t\nnodes:\n  a: {target: nonexistent_pkg_xyz.mod:Thing}\n")
    assert run_topo("validate", path).exit_code == 0
    assert "nonexistent_pkg_xyz" not in sys.modules
    result = run_topo("validate", "--check-imports", path)
    assert result.exit_code == 1
    assert f"{path}:3:15: error: group 'a': cannot import 'nonexistent_pkg_xyz.mod:Thing'" in (
        result.stderr
    )


def test_check_imports_not_callable(run_topo: Any, write_topo: Any) -> None:
    path = write_topo("name: t\nnodes:\n  a: {target: os:sep}\n")
    result = run_topo("validate", "--check-imports", path)
    assert result.exit_code == 1
    assert "'os:sep' is a str, not something that can be called" in result.stderr


def test_missing_file(run_topo: Any, tmp_path: Path) -> None:
    result = run_topo("validate", tmp_path / "nope.yaml")
    assert result.exit_code == 1
    assert "no such file" in result.stderr


# --- plan ----------------------------------------------------------------------------------


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_plan_json_loads_back_to_an_equal_program(run_topo: Any, example: Path) -> None:
    result = run_topo("plan", example, "--json")
    assert result.exit_code == 0, result.output
    assert loads(result.stdout) == compile_spec(load_spec(example))


def test_plan_json_with_overrides(run_topo: Any) -> None:
    path = ROOT / "examples/topologies/mava_dial.yaml"
    result = run_topo("plan", path, "--json", "-p", "num_caches=0", "-p", "num_executors=5")
    program = loads(result.stdout)
    assert program.params["num_caches"] == 0
    assert len(program.nodes_of("executor")) == 5
    assert program == compile_spec(load_spec(path, ["num_caches=0", "num_executors=5"]))


def test_plan_text(run_topo: Any) -> None:
    result = run_topo("plan", ROOT / "examples/topologies/consumer_producers.yaml")
    assert result.exit_code == 0
    assert "program consumer_producers" in result.stdout
    assert "consumer = courier examples.agents.producers:Consumer(" in result.stdout
    assert "producers=[@producer/0, @producer/1, @producer/2, @producer/3]" in result.stdout


def test_plan_says_who_may_call_whom(run_topo: Any, write_topo: Any) -> None:
    result = run_topo("plan", ROOT / "examples/topologies/mava_dial.yaml")
    assert result.exit_code == 0, result.output
    rights = result.stdout.split("who may call whom", 1)[1]
    assert "\n  executor (each of 2) -> replay, cacher/0, counter, trainer\n" in rights
    assert "\n  replay -> (no node)\n" in rights
    # Replicas that differ get a line each; a whole group is folded.
    path = write_topo(
        "name: t\nnodes:\n"
        "  w: {target: os:getcwd, count: 3}\n"
        "  a: {target: os:getcwd, count: 2, args: {p: '@w[${replica}]'}}\n"
        "  b: {target: os:getcwd, args: {p: '@w'}}\n"
    )
    result = run_topo("plan", path)
    assert result.exit_code == 0, result.output
    rights = result.stdout.split("who may call whom", 1)[1]
    assert "\n  a/0 -> w/0\n  a/1 -> w/1\n" in rights
    assert "\n  b -> w (all 3)" in rights


# --- schema --------------------------------------------------------------------------------


def test_schema_prints_and_writes_the_generated_schema(run_topo: Any, tmp_path: Path) -> None:
    # (that the schema file is not stale is checked in test_cli_conventions)
    result = run_topo("schema")
    assert result.exit_code == 0
    assert result.stdout == schema_text()
    out = tmp_path / "s.json"
    assert run_topo("schema", "-o", out).exit_code == 0
    assert out.read_text() == schema_text()


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_carry_the_schema_modeline(example: Path) -> None:
    first = example.read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=../../schemas/topology.schema.json"
    assert (example.parent / "../../schemas/topology.schema.json").resolve() == SCHEMA


def _check(schema: dict[str, Any], value: Any) -> list[str]:
    """Problems the real JSON Schema (2020-12) validator finds, as 'path: message' lines."""
    validator = jsonschema.Draft202012Validator(schema)
    out = []
    for error in validator.iter_errors(value):
        path = "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.path)
        out.append(f"{path}: {error.message}")
    return out


def _yaml(path: Path) -> Any:
    from ruamel.yaml import YAML

    return json.loads(json.dumps(YAML(typ="safe").load(path.read_text())))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_schema_accepts_every_example(example: Path) -> None:
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    assert _check(schema, _yaml(example)) == []


def test_schema_check_rejects_bad_files(tmp_path: Path) -> None:
    """The schema is not vacuous: it rejects what the loader rejects."""
    schema = json.loads(SCHEMA.read_text())
    doc = _yaml(EXAMPLES[0])
    doc["nodes"]["learner"]["cuont"] = 1
    doc["nodes"]["actor"]["count"] = "three"
    doc["nodes"]["replay"]["kind"] = "server"
    doc["colocation"] = [{"nodes": []}]
    joined = "\n".join(_check(schema, doc))
    assert "$.nodes.learner: Additional properties are not allowed ('cuont'" in joined
    assert "$.nodes.actor.count: 'three' is not valid" in joined
    assert "$.nodes.replay.kind: 'server' is not one of" in joined
    assert "$.colocation: [{'nodes': []}] is not valid" in joined
    del doc["nodes"]
    assert "$: 'nodes' is a required property" in _check(schema, doc)


# --- real subprocesses: exit codes and stderr as a user sees them ---------------------------


def _topo(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    return subprocess.run(
        [str(TOPO), *map(str, args)], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )


needs_script = pytest.mark.skipif(not TOPO.exists(), reason=f"{TOPO} is not installed")


@needs_script
def test_subprocess_valid_and_acme_check() -> None:
    acme = "examples/topologies/acme_distributed.yaml"
    ok = _topo("validate", "-q", acme, "-p", "colocate_learner_and_replay=true")
    assert (ok.returncode, ok.stdout, ok.stderr) == (0, "", "")
    bad = _topo("validate", acme, "-p", "colocate_learner_and_replay=true", "-p", "num_learners=2")
    assert bad.returncode == 1
    line = (ROOT / acme).read_text().splitlines().index("  - name: learner_replay") + 1
    assert bad.stderr.startswith(f"{acme}:{line}:3: error: ")
    assert "Traceback" not in bad.stderr + bad.stdout


@needs_script
@pytest.mark.parametrize(
    "text",
    [
        "name: t\nnodes:\n  a:\n    target: m:C\n    args:\n      x: @b\n",  # unquoted ref
        "name: t\nnodes:\n  a: {target: m:C, args: {x: '${__import__(\"os\")}'}}\n",
        "name: t\nnodes:\n  a: {target: m:C\n",  # unbalanced
    ],
    ids=["unquoted-ref", "import-expr", "unbalanced"],
)
def test_subprocess_bad_files_exit_1_without_traceback(tmp_path: Path, text: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    proc = _topo("validate", path)
    assert proc.returncode == 1
    assert re.match(rf"{re.escape(str(path))}:\d+:\d+: error: ", proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout


@needs_script
def test_subprocess_check_imports_and_plan_json(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("name: t\nnodes:\n  a: {target: nonexistent_pkg_xyz.mod:Thing}\n")
    assert _topo("validate", "-q", path).returncode == 0
    proc = _topo("validate", "--check-imports", path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{path}:3:15: error: group 'a': cannot import" in proc.stderr
    plan = _topo("plan", "--json", path)
    assert plan.returncode == 0
    assert loads(plan.stdout) == compile_spec(load_spec(path))


def test_every_schema_field_has_a_description() -> None:
    """Editors show these descriptions on hover; a field without one is a gap."""
    schema = json.loads(SCHEMA.read_text())
    missing: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            for key, prop in (node.get("properties") or {}).items():
                if "description" not in prop:
                    missing.append(f"{path}.{key}")
            for key, value in node.items():
                walk(value, f"{path}/{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(schema, "$")
    assert schema["$defs"]["GroupSpec"]["properties"]["count"]["description"]
    assert missing == []
