"""``topo export`` writes a node kind's arguments back as the kind's own YAML fields, for a
plug-in kind as for the built-in ones, and refuses a kind whose fields it cannot invert."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pydantic import Field

from tests.export.irview import differences, view
from topo.compile import compile_spec
from topo.export import ExportError, export_program
from topo.ir import Program
from topo.kinds import NodeKind, Options, register_kind, unregister_kind
from topo.loader import load_spec

GREETINGS = """
name: greetings
nodes:
  hello:
    kind: greeter
    count: 3
    greeting: hi
    out: {out}
    args:
      times: ${{replica}}
    overrides:
      "2": {{greeting: bye}}
  listener:
    target: kind_plugin:greet
    args: {{greeting: "@hello", out: x, times: 1}}
"""


def _compile(path: Path) -> Program:
    return compile_spec(load_spec(path))


def _round_trip(tmp_path: Path, text: str) -> tuple[Program, str]:
    """Compile ``text``, export it, load the export back: the program and the YAML."""
    source = tmp_path / "source.yaml"
    source.write_text(text)
    program = _compile(source)
    exported = export_program(program, schema="s.json")
    back = tmp_path / "exported.yaml"
    back.write_text(exported.text)
    diff = differences(view(program, exported), view(_compile(back)))
    assert not diff, "\n".join(diff) + "\n\n" + exported.text
    return program, exported.text


def test_a_plugin_kind_round_trips_through_its_own_fields(greeter: None, tmp_path: Path) -> None:
    _, text = _round_trip(tmp_path, GREETINGS.format(out=tmp_path / "g.txt"))
    assert f"    kind: greeter\n    count: 3\n    greeting: hi\n    out: {tmp_path}/g.txt\n" in text
    assert "    args:\n      times: ${replica}\n" in text
    assert "    overrides:\n      '2':\n        greeting: bye\n" in text
    assert "target" not in text.split("listener:")[0]  # the kind's target is built in
    assert "greeting: '@hello'" in text  # an ordinary argument stays an argument


class Renamed(Options):
    """A field the kind passes under another name."""

    text: str | None = Field(None, description="renamed only: the text written.")


def _renamed_args(o: Renamed) -> dict[str, Any]:
    return {"greeting": o.text, "out": "renamed.txt"}


def _renamed_fields(args: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    rest = dict(args)
    fields = {"text": rest.pop("greeting", None)}
    rest.pop("out", None)
    return fields, rest


@pytest.fixture
def renamed() -> Iterator[type[Renamed]]:
    yield Renamed
    unregister_kind("renamed")


def _renamed_kind(**extra: Any) -> NodeKind:
    return NodeKind(
        "renamed", "passes its field under another name", Renamed, required="text",
        builtin_target="kind_plugin:greet", args=_renamed_args, **extra,
    )  # fmt: skip


RENAMED = "name: r\nnodes:\n  a: {kind: renamed, text: hi}\n"


def test_a_kind_without_an_inverse_is_refused_by_name(
    greeter: None, renamed: type, tmp_path: Path
) -> None:
    register_kind(_renamed_kind())
    source = tmp_path / "r.yaml"
    source.write_text(RENAMED)
    with pytest.raises(ExportError) as info:
        export_program(_compile(source), schema="s.json")
    [d] = info.value.diagnostics
    assert d.message == (
        "node a: has arguments (greeting, out) that kind 'renamed' does not give back from "
        "the YAML fields written for them (none)"
    )
    assert d.hint == "declare fields_of on kind 'renamed': the inverse of its args"


def test_a_kind_with_fields_of_round_trips(greeter: None, renamed: type, tmp_path: Path) -> None:
    register_kind(_renamed_kind(fields_of=_renamed_fields))
    _, text = _round_trip(tmp_path, RENAMED)
    assert "  a:\n    kind: renamed\n    text: hi\n" in text and "args" not in text


def test_builtin_kind_fields_come_from_the_kinds(tmp_path: Path) -> None:
    text = """
name: b
nodes:
  replay: {kind: reverb, tables: m:tables, checkpoint: {dir: /c, every_s: 5.0}}
  learner: {target: m:Learner, args: {replay: "@replay"}}
  cache: {kind: cacher, source: "@learner", refresh_ms: 10, stale_ms: 20}
"""
    _, out = _round_trip(tmp_path, text)
    assert "  replay:\n    kind: reverb\n    tables: m:tables\n    checkpoint:\n" in out
    assert "      dir: /c\n      every_s: 5.0\n" in out
    assert "    source: '@learner'\n    refresh_ms: 10\n    stale_ms: 20\n" in out
