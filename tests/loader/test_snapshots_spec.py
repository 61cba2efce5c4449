"""``snapshots:`` as written: a bad value, an unknown key or a wrong type is one positioned
error (file, line, column) with the loader's usual wording, and the JSON Schema editors use
says the same and accepts a ``${...}`` where a number goes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from topo.loader.schema import topology_schema

ROOT = Path(__file__).resolve().parents[2]
HEAD = """
name: t
nodes:
  a: {target: "m:C"}
snapshots:
"""


@pytest.mark.parametrize(
    ("line", "message", "col"),
    [
        ("every_s: 0", "'snapshots.every_s' must be > 0.0, got 0", 12),
        ("every_s: -600", "'snapshots.every_s' must be > 0.0, got -600", 12),
        ("every_s: soon", "'snapshots.every_s' must be a number, got 'soon'", 12),
        ("every_s: '600'", "'snapshots.every_s' must be a number, got '600'", 12),
        ("keep: 0", "'snapshots.keep' must be ≥ 1, got 0", 9),
        ("keep: -2", "'snapshots.keep' must be ≥ 1, got -2", 9),
        ("keep: 2.5", "'snapshots.keep' must be an integer, got 2.5", 9),
        ("keep: true", "'snapshots.keep' must be an integer, got True", 9),
        ("at_stop: 'yes'", "'snapshots.at_stop' must be true or false, got 'yes'", 12),
        ("at_stop: 1", "'snapshots.at_stop' must be true or false, got 1", 12),
        ("pause_timeout_s: 0", "'snapshots.pause_timeout_s' must be > 0.0, got 0", 20),
        ("pause_timeout_s: [30]", "'snapshots.pause_timeout_s' must be a number", 20),
    ],
)
def test_a_bad_value_is_a_positioned_error(
    errors_of: Any, line: str, message: str, col: int
) -> None:
    f = errors_of(HEAD + f"  {line}\n")
    assert message in f.headline
    assert f.where() == ("topology.yaml", 5, col)


def test_an_unknown_key_points_at_it_and_suggests(errors_of: Any) -> None:
    f = errors_of(HEAD + "  every_s: 60\n  evry: 5\n")
    assert "unknown key 'evry' in 'snapshots'" in f.headline
    assert f.where() == ("topology.yaml", 6, 3)
    assert f.hint() == "did you mean 'every_s'?"


def test_far_from_any_key_the_hint_lists_them(errors_of: Any) -> None:
    f = errors_of(HEAD + "  zzz: 1\n")
    assert "allowed keys: at_stop, every_s, keep, pause_timeout_s" in f.hint()


def test_a_section_that_is_not_a_mapping(errors_of: Any) -> None:
    f = errors_of(HEAD.replace("snapshots:", "snapshots: 600"))
    assert "'snapshots' must be a mapping" in f.headline
    assert f.where() == ("topology.yaml", 4, 12)


def test_several_bad_values_are_all_reported(errors_of: Any) -> None:
    f = errors_of(HEAD + "  every_s: 0\n  keep: 0\n")
    lines = sorted(d.pos.line for d in f.diagnostics if d.pos is not None)
    assert lines == [5, 6], f.text


def test_a_bad_value_from_a_parameter_points_at_the_expression(errors_of: Any) -> None:
    f = errors_of(
        """
        name: t
        params: {every: 600}
        nodes:
          a: {target: "m:C"}
        snapshots: {every_s: "${every}"}
        """,
        "every=-1",
    )
    assert "'snapshots.every_s' must be > 0.0, got -1" in f.headline
    assert f.where()[1] == 5


def _problems(doc: dict[str, Any]) -> list[str]:
    validator = jsonschema.Draft202012Validator(topology_schema())
    return [
        ".".join(map(str, e.path)) + ": " + e.message
        for e in validator.iter_errors(json.loads(json.dumps(doc)))
    ]


def test_the_json_schema_knows_the_section() -> None:
    doc: dict[str, Any] = {"name": "t", "nodes": {"a": {"target": "m:C"}}}
    every = {"every_s": "${every}", "keep": 3, "at_stop": False, "pause_timeout_s": 12.5}
    assert _problems({**doc, "snapshots": every}) == []
    assert _problems({**doc, "snapshots": {"every_s": None}}) == []
    for bad in ({"keep": 0}, {"evry": 1}, {"every_s": 0}, {"at_stop": "yes"}, 600):
        assert _problems({**doc, "snapshots": bad}) == [
            f"snapshots: {bad!r} is not valid under any of the given schemas"
        ]
    shipped = json.loads((ROOT / "schemas" / "topology.schema.json").read_text())
    assert "snapshots" in shipped["properties"]
