"""``topo export``: a builder's parameters become the file's ``params:``, written
``${name}`` where the builder used them, so ``-p`` tunes the YAML as it tunes the
Python; parameters used otherwise stay written in, and the note says why."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from topo.export.params import find_uses, moved, scalar_params

P = "tests.export.programs"


def _groups(run_topo: Callable[..., Any], path: Path, *params: str) -> dict[str, int]:
    """Group name -> node count of the file, compiled with ``-p`` ``params``."""
    argv: list[Any] = ["plan", path, "--json"]
    for p in params:
        argv += ["-p", p]
    result = run_topo(*argv)
    assert result.exit_code == 0, result.stderr
    program = json.loads(result.stdout)
    counts: dict[str, int] = {}
    for node in program["nodes"]:
        counts[node["group"]] = counts.get(node["group"], 0) + 1
    return counts


def _export(run_topo: Callable[..., Any], out: Path, builder: str, *params: str) -> Any:
    argv: list[Any] = ["export", builder, "-o", out]
    for p in params:
        argv += ["-p", p]
    result = run_topo(*argv)
    assert result.exit_code == 0, result.stderr
    assert run_topo("validate", out, "-q").exit_code == 0
    return result


def test_launchpad_consumer_producers_keeps_num_producers_tunable(
    run_topo: Callable[..., Any], tmp_path: Path
) -> None:
    out = tmp_path / "cp.yaml"
    _export(run_topo, out, "examples.launchpad.consumer_producers:make_program")
    doc = yaml.safe_load(out.read_text())
    assert doc["params"] == {"seed": 0, "num_producers": 4}  # the builder's default
    assert doc["nodes"]["producer"]["count"] == "${num_producers}"
    assert _groups(run_topo, out) == {"producer": 4, "consumer": 1}
    assert _groups(run_topo, out, "num_producers=8") == {"producer": 8, "consumer": 1}
    checked = run_topo("validate", out, "-p", "num_producers=8")
    assert checked.exit_code == 0, checked.stderr
    assert "9 nodes" in checked.stdout + checked.stderr


def test_the_p_values_given_to_export_are_the_defaults(
    run_topo: Callable[..., Any], tmp_path: Path
) -> None:
    out = tmp_path / "cp.yaml"
    _export(run_topo, out, f"{P}:consumer_producers", "num_producers=2")
    doc = yaml.safe_load(out.read_text())
    assert doc["params"]["num_producers"] == 2
    assert _groups(run_topo, out)["producer"] == 2
    assert _groups(run_topo, out, "num_producers=5")["producer"] == 5


def test_values_of_every_kind_and_what_is_left_out(
    run_topo: Callable[..., Any], tmp_path: Path
) -> None:
    out = tmp_path / "tunable.yaml"
    result = _export(run_topo, out, f"{P}:tunable")
    doc = yaml.safe_load(out.read_text())
    assert doc["params"] == {
        "seed": 0,
        "num_actors": 3,
        "epsilon": 0.25,
        "flavour": "plain",
        "greedy": False,
    }
    actor = doc["nodes"]["actor"]
    assert actor["count"] == "${num_actors}"
    assert actor["args"]["epsilon"] == "${epsilon}"
    assert actor["args"]["flavour"] == "${flavour}"
    assert actor["args"]["greedy"] == "${greedy}"
    assert doc["nodes"]["eval"]["args"]["episodes"] == 20  # derived: written in
    assert "parameter 'episodes' is not a param" in result.stderr
    assert "computed from it" in result.stderr
    assert "workers" not in result.stderr  # no plain value: not a parameter at all
    plan = run_topo(
        "plan", out, "--json", "-p", "epsilon=0.5", "-p", "flavour=spicy", "-p", "greedy=true"
    )
    assert plan.exit_code == 0, plan.stderr
    args = json.loads(plan.stdout)["nodes"][1]["args"]
    assert json.dumps(args).count('"spicy"') == 1
    assert "0.5" in json.dumps(args) and "true" in json.dumps(args)


def test_parameters_that_change_the_structure_stay_written_in(
    run_topo: Callable[..., Any], tmp_path: Path
) -> None:
    out = tmp_path / "everything.yaml"
    result = _export(run_topo, out, f"{P}:everything")
    doc = yaml.safe_load(out.read_text())
    assert set(doc["params"]) == {"seed"}
    assert "'num_actors' is not a param" in result.stderr
    assert "'actors_per_process' is not a param" in result.stderr


def test_find_uses_refuses_derived_values_and_structure_changes() -> None:
    base = {"nodes": {"a": {"count": 3, "args": {"n": 3, "twice": 6, "same": 3}}}}

    def build(kwargs: dict[str, Any]) -> dict[str, Any]:
        n = kwargs["n"]
        return {"nodes": {"a": {"count": n, "args": {"n": n, "twice": 2 * n, "same": 3}}}}

    uses = find_uses(build, {}, {"n": 3}, base)
    assert "n" not in uses.paths and "computed from it" in uses.left_out["n"]

    def plain(kwargs: dict[str, Any]) -> dict[str, Any]:
        n = kwargs["n"]
        return {"nodes": {"a": {"count": n, "args": {"n": n, "twice": 6, "same": 3}}}}

    uses = find_uses(plain, {}, {"n": 3}, base)
    assert uses.paths == {"n": [("nodes", "a", "count"), ("nodes", "a", "args", "n")]}
    assert uses.defaults == {"n": 3}  # the 3 that does not move with n is left alone


def test_scalar_params_and_moves() -> None:
    def builder(a: int = 1, b: str = "x", c: Any = None, d: list[int] | None = None) -> None:
        """A builder."""

    assert scalar_params(builder, {"c": 2.5}) == {"a": 1, "b": "x", "c": 2.5}
    assert moved(True) == [False] and moved(3) == [4, 5] and moved("x") == ["x-1", "x-2"]
