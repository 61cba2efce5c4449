"""``topo graph`` over the real seed topologies in ``examples/topologies``, in every format."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from render_support import needs_dot
from test_dot import svg_counts
from test_mermaid import check
from typer.testing import CliRunner

from topo.cli.app import app
from topo.cli.common import load_program
from topo.ir import Program
from topo.render import ViewOptions, build_view, render, to_dot, to_mermaid

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "topologies"
FILES = sorted(EXAMPLES.glob("*.yaml"))
SEEDS = ["acme_colocated", "acme_distributed", "acme_offline", "consumer_producers", "mava_dial"]
BIG = {"acme_distributed": ["num_actors=64", "num_learners=3"]}

pytestmark = pytest.mark.skipif(not FILES, reason="examples/topologies/*.yaml not present")


def load(name: str, big: bool = False) -> Program:
    return load_program(EXAMPLES / f"{name}.yaml", BIG.get(name, []) if big else [])


def test_all_five_seeds_are_there() -> None:
    assert {f.stem for f in FILES} >= set(SEEDS)


@needs_dot
@pytest.mark.parametrize("name", SEEDS)
@pytest.mark.parametrize("big", [False, True])
def test_seed_through_real_dot_counts_match_ir(name: str, big: bool) -> None:
    program = load(name, big)
    expanded = build_view(program, ViewOptions(expand=True))
    nodes, edges, _ = svg_counts(render(to_dot(expanded), "svg"))
    assert sorted(nodes) == sorted(n.id for n in program.nodes)
    assert edges == len(program.edges)
    collapsed = build_view(program)
    nodes, edges, _ = svg_counts(render(to_dot(collapsed), "svg"))
    assert len(nodes) == len(collapsed.nodes) and edges == len(collapsed.edges)
    assert sum(e.count for e in collapsed.edges) == len(program.edges)
    assert sum(n.count for n in collapsed.nodes.values()) == len(program.nodes)


@pytest.mark.parametrize("name", SEEDS)
def test_seed_mermaid_is_wellformed(name: str) -> None:
    for program in (load(name), load(name, big=True)):
        for opts in (ViewOptions(), ViewOptions(expand=True), ViewOptions(show_disabled=True)):
            view = build_view(program, opts)
            nodes, edges, _ = check(to_mermaid(view))
            assert len(nodes) == len(view.nodes) and len(edges) == len(view.edges)


def test_big_acme_collapses_actors_with_a_fan() -> None:
    view = build_view(load("acme_distributed", big=True))
    (actor,) = [n for n in view.nodes.values() if n.collapsed]
    assert actor.label == "actor \u00d764"
    fan = sorted(e.count for e in view.edges if e.src == actor.key and e.via == "round_robin")
    assert fan == [21, 21, 22]


@pytest.mark.parametrize("name", SEEDS)
@pytest.mark.parametrize("fmt", ["--dot", "--mermaid", None])
def test_cli_output_is_byte_identical_across_runs(name: str, fmt: str | None) -> None:
    args = ["graph", str(EXAMPLES / f"{name}.yaml"), *([fmt] if fmt else [])]
    first = CliRunner().invoke(app, args)
    second = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    assert first.stdout == second.stdout and first.stdout


@needs_dot
@pytest.mark.parametrize("name", SEEDS)
def test_cli_writes_svg_and_png(name: str, tmp_path: Path) -> None:
    for suffix in (".svg", ".png"):
        out = tmp_path / f"{name}{suffix}"
        result = CliRunner().invoke(app, ["graph", str(EXAMPLES / f"{name}.yaml"), "-o", str(out)])
        assert result.exit_code == 0, result.output
        data = out.read_bytes()
        if suffix == ".svg":
            ET.fromstring(data)
        else:
            assert data.startswith(b"\x89PNG")


def test_cli_group_focus_and_unknown_group() -> None:
    path = str(EXAMPLES / "acme_distributed.yaml")
    ok = CliRunner().invoke(app, ["graph", path, "--dot", "--group", "learner"])
    assert ok.exit_code == 0 and '"learner"' in ok.stdout
    bad = CliRunner().invoke(app, ["graph", path, "--group", "nosuch"])
    assert bad.exit_code == 1 and "groups: replay, counter" in bad.stderr
