"""``snapshots:`` compiled into ``Program.snapshots``: absent takes none, present takes one at
the stop unless told not to, parameters and ``extends:`` work as for every other field."""

from __future__ import annotations

from typing import Any

from topo.ir import SnapshotSettings

NODES = """
name: t
nodes:
  a: {target: "m:C"}
"""


def test_without_the_section_no_snapshot_is_taken(compile_text: Any) -> None:
    snapshots = compile_text(NODES).snapshots
    assert snapshots == SnapshotSettings(every_s=None, keep=3, at_stop=False, pause_timeout_s=30.0)
    assert not snapshots.enabled


def test_an_empty_section_takes_one_at_the_stop(compile_text: Any) -> None:
    snapshots = compile_text(NODES + "snapshots: {}\n").snapshots
    assert snapshots == SnapshotSettings(every_s=None, keep=3, at_stop=True, pause_timeout_s=30.0)
    assert snapshots.enabled


def test_every_field_is_carried(compile_text: Any) -> None:
    program = compile_text(
        NODES + "snapshots:\n  every_s: 600\n  keep: 5\n  at_stop: false\n  pause_timeout_s: 7.5\n"
    )
    assert program.snapshots == SnapshotSettings(600.0, 5, False, 7.5)
    assert isinstance(program.snapshots.every_s, float)
    assert program.snapshots.enabled
    assert program.stop.grace_s == 5.0  # the stop section keeps its defaults beside it


def test_a_null_clock_and_no_stop_snapshot_takes_none(compile_text: Any) -> None:
    snapshots = compile_text(NODES + "snapshots: {every_s: null, at_stop: false}\n").snapshots
    assert snapshots == SnapshotSettings()
    assert not snapshots.enabled


def test_fields_take_parameters_and_overrides(compile_text: Any) -> None:
    text = """
        name: t
        params:
          snapshot_every: 600
          keep: {default: 2, type: int, help: snapshots kept}
          final: true
        nodes:
          a: {target: "m:C"}
        snapshots:
          every_s: ${snapshot_every}
          keep: ${keep + 1}
          at_stop: ${final}
          pause_timeout_s: ${30 if snapshot_every is None else snapshot_every / 20}
    """
    assert compile_text(text).snapshots == SnapshotSettings(600.0, 3, True, 30.0)
    moved = compile_text(text, "snapshot_every=120", "keep=9", "final=false")
    assert moved.snapshots == SnapshotSettings(120.0, 10, False, 6.0)
    assert compile_text(text, "snapshot_every=null", "final=false").snapshots.every_s is None


def test_a_file_extends_a_base_s_section(compile_text: Any, write_topo: Any) -> None:
    write_topo(NODES + "snapshots: {every_s: 600, keep: 4}\n", name="base.yaml")
    program = compile_text("extends: base.yaml\nsnapshots: {keep: 1}\n")
    assert program.snapshots == SnapshotSettings(600.0, 1, True, 30.0)
