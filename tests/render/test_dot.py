"""DOT output fed to the real Graphviz ``dot``; the SVG parsed and counted against the IR."""

from __future__ import annotations

import subprocess
import xml.etree.ElementTree as ET

import pytest
from render_programs import SEEDS, ProgramBuilder, acme_distributed
from render_support import needs_dot

from topo.ir import Program, Ref
from topo.render import ViewOptions, build_view, render, to_dot
from topo.render.dot import quote

SVG = "{http://www.w3.org/2000/svg}"


def svg_counts(svg: bytes) -> tuple[list[str], int, int]:
    """Node titles, edge count and cluster count in Graphviz SVG."""
    root = ET.fromstring(svg)
    nodes, edges, clusters = [], 0, 0
    for g in root.iter(f"{SVG}g"):
        cls = g.get("class")
        title = g.find(f"{SVG}title")
        if cls == "node" and title is not None:
            nodes.append(title.text or "")
        elif cls == "edge":
            edges += 1
        elif cls == "cluster":
            clusters += 1
    return nodes, edges, clusters


@needs_dot
@pytest.mark.parametrize("name", sorted(SEEDS))
@pytest.mark.parametrize("mode", ["collapsed", "expanded", "disabled", "collapse-all"])
def test_real_dot_accepts_every_seed_and_counts_match(name: str, mode: str) -> None:
    program = SEEDS[name]()
    opts = {
        "collapsed": ViewOptions(),
        "expanded": ViewOptions(expand=True),
        "disabled": ViewOptions(show_disabled=True),
        "collapse-all": ViewOptions(collapse_above=1),
    }[mode]
    view = build_view(program, opts)
    nodes, edges, clusters = svg_counts(render(to_dot(view), "svg"))
    assert sorted(nodes) == sorted(view.nodes)
    assert edges == len(view.edges)
    assert clusters == sum(1 for b in view.root.walk() if b.kind != "root")
    if mode == "expanded":
        assert sorted(nodes) == sorted(n.id for n in program.nodes)
        assert edges == len(program.edges)


@needs_dot
def test_collapsed_large_program_counts() -> None:
    program = acme_distributed(num_actors=64, num_learners=3)
    nodes, edges, _ = svg_counts(render(to_dot(build_view(program)), "svg"))
    assert len(nodes) == len(program.nodes) - 64 + 1
    # actor box -> replay, counter, and the 3-way round-robin fan; plus the singletons' edges
    singles = [e for e in program.edges if not e.src.startswith("actor/")]
    assert edges == 5 + len(singles)


@needs_dot
def test_png_is_a_png() -> None:
    data = render(to_dot(build_view(acme_distributed())), "png")
    assert data[:8] == b"\x89PNG\r\n\x1a\n"


def awkward_program() -> Program:
    """Names and arguments that need escaping in DOT and Mermaid."""
    return (
        ProgramBuilder('odd "name" \\ {x}')
        .group("end", kind="py", target='m:"Q"')
        .group("a-b", count=2, args=lambda i: {'x"y': Ref("end"), "k<b>": [Ref("end")]})
        .build()
    )


@needs_dot
def test_escaping_survives_real_dot() -> None:
    view = build_view(awkward_program(), ViewOptions(expand=True))
    nodes, edges, _ = svg_counts(render(to_dot(view), "svg"))
    assert sorted(nodes) == ["a-b/0", "a-b/1", "end"]
    assert edges == 4


def test_quote_escapes() -> None:
    assert quote('a"b\\c\nd') == '"a\\"b\\\\c\\nd"'


def test_shapes_follow_roles() -> None:
    text = to_dot(build_view(acme_distributed(num_actors=64)))
    line = {ln.split(" [")[0].strip(): ln for ln in text.splitlines() if "shape=" in ln}
    assert "shape=cylinder" in line['"replay"']
    assert "shape=hexagon" in line['"counter"']
    assert "shape=octagon" in line['"steps_limiter"']
    assert "peripheries=2" in line['"group:actor/*"']
    assert "style=dashed" in next(ln for ln in text.splitlines() if "round-robin" in ln)


def test_thread_colocation_differs_from_host_placement() -> None:
    from render_programs import acme_colocated

    text = to_dot(build_view(acme_colocated()))
    assert 'label="host placement: gpu_host"' in text
    assert 'label="process learner_replay · 2 threads"' in text
    host = text.split('label="host placement: gpu_host";')[1].splitlines()[1]
    proc = text.split('label="process learner_replay · 2 threads";')[1].splitlines()[1]
    assert host != proc and "dashed" in host and "filled" in proc


@needs_dot
def test_dot_binary_rejects_garbage() -> None:
    # guards the test above: the real dot does fail on broken input
    done = subprocess.run(["dot", "-Tsvg"], input=b"digraph { a -> }", capture_output=True)
    assert done.returncode != 0
