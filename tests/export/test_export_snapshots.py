"""The exporter writes ``snapshots:`` back so that the YAML compiles to the same settings:
nothing when none are taken, and ``at_stop: false`` spelled out (the section's default
is true)."""

from __future__ import annotations

from typing import Any

import pytest

from topo.export import export_program
from topo.ir import SnapshotSettings

NODES = 'name: t\nnodes:\n  a: {target: "m:C"}\n'


@pytest.mark.parametrize(
    ("section", "written"),
    [
        ("", None),
        ("snapshots: {}\n", "snapshots: {}"),
        ("snapshots: {every_s: 600, keep: 2}\n", "snapshots:\n  every_s: 600.0\n  keep: 2\n"),
        ("snapshots: {every_s: 60, at_stop: false}\n", "  at_stop: false\n"),
        ("snapshots: {at_stop: false, pause_timeout_s: 5}\n", "  pause_timeout_s: 5.0\n"),
        ("snapshots: {at_stop: false}\n", None),  # the same as no section
    ],
)
def test_the_section_is_written_back_and_compiles_the_same(
    compile_text: Any, section: str, written: str | None
) -> None:
    program = compile_text(NODES + section)
    text = export_program(program, schema="x.json").text
    if written is None:
        assert "snapshots" not in text
    else:
        assert written in text, text
    again = compile_text(text)
    assert again.snapshots == program.snapshots
    assert (again.snapshots == SnapshotSettings()) == (written is None)
