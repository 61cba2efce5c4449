"""Round trip: a Launchpad program exported to YAML compiles (``topo plan --json``) to
the IR of the Python program, node for node, after the renames the exporter reports."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import topo.launchpad as lp
from tests.export import programs
from tests.export.irview import differences, view
from topo.export import export_program
from topo.ir import loads


def _round_trip(
    lp_program: lp.Program, tmp_path: Path, run_topo: Callable[..., Any], **compile: Any
) -> tuple[dict[str, Any], dict[str, Any], str]:
    compiled = lp.compile_program(lp_program, **compile)
    exported = export_program(compiled.program, schema="../../schemas/topology.schema.json")
    path = tmp_path / "exported.yaml"
    path.write_text(exported.text, encoding="utf-8")
    result = run_topo("plan", path, "--json")
    assert result.exit_code == 0, result.output + "\n" + exported.text
    yaml_ir = loads(result.stdout)
    return view(compiled.program, exported), view(yaml_ir), exported.text


def _assert_same(expected: dict[str, Any], got: dict[str, Any], text: str) -> None:
    diff = differences(expected, got)
    assert not diff, (
        "the YAML program differs from the Python one:\n  " + "\n  ".join(diff) + "\n\n" + text
    )


def test_consumer_producers_round_trip(tmp_path: Path, run_topo: Callable[..., Any]) -> None:
    expected, got, text = _round_trip(programs.consumer_producers(3), tmp_path, run_topo)
    _assert_same(expected, got, text)
    assert "count: 3" in text and "producer_id: ${replica}" in text
    assert "producers: '@producer'" in text


@pytest.mark.parametrize("seed", [0, 11])
def test_every_construct_round_trips(
    tmp_path: Path, run_topo: Callable[..., Any], seed: int
) -> None:
    expected, got, text = _round_trip(
        programs.everything(), tmp_path, run_topo, resources=programs.RESOURCES, seed=seed
    )
    _assert_same(expected, got, text)
    # What the YAML says, beyond being equal: the constructs the issue asks for.
    for line in (
        "steps_limiter:",  # counter's second target, split off
        "replay:\n    kind: reverb\n    tables: tests.export.programs:build_replay",
        "per_process: 2",
        "round_robin:\n          - '@learner'\n          - '@secondary'",
        "kind: cacher\n    count: 2\n    source: '@learner'\n    refresh_ms: 200",
        "disable_run: true",
        "call_timeout_s: 5.0",
        "threads: 4",
        "ACTOR_THREADS: '1'",
        "import: topo.launchpad.stopping:stop_program",
        "mode: host",
        "- '@learner'\n      - '@replay'",
        "motto: costs $$${x} and $${y}",
        "mention: '@@someone'",
    ):
        assert line in text, f"{line!r} not in:\n{text}"


def test_views_show_a_difference(tmp_path: Path, run_topo: Callable[..., Any]) -> None:
    """The comparison itself: a changed argument is reported with its path."""
    expected, got, _ = _round_trip(programs.consumer_producers(2), tmp_path, run_topo)
    got["nodes"]["producer/1"]["args"] = ("map", [("producer_id", ("int", 5))])
    got["edges"] = got["edges"][1:]
    diff = differences(expected, got)
    assert diff[0].startswith("nodes.producer/1.args: ")
    assert any(
        "only in Python ('consumer', 'producer/0', 'producers[0]', 'ref')" in d for d in diff
    )


@pytest.mark.parametrize("name", ["consumer_producers", "mava_dial"])
def test_seed_programs_without_keys_round_trip(
    name: str, tmp_path: Path, run_topo: Callable[..., Any]
) -> None:
    """The seed programs that pass no PRNG key come back exactly (the others get
    ${seed.key} in place of their keys, by design)."""
    import importlib

    builder = importlib.import_module(f"examples.launchpad.{name}").make_program
    expected, got, text = _round_trip(builder(), tmp_path, run_topo)
    _assert_same(expected, got, text)
