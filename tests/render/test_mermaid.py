"""Mermaid output: checked line by line against the flowchart grammar subset we emit."""

from __future__ import annotations

import re

import pytest
from render_programs import SEEDS, acme_colocated, acme_distributed
from test_dot import awkward_program

from topo.kinds import DEFAULT_LOOK, all_kinds
from topo.render import View, ViewOptions, build_view, to_mermaid

# Every node shape a registered kind declares, and the default one.
SHAPES = {look.mermaid for kind in all_kinds() for look in kind.looks.values()}
SHAPES.add(DEFAULT_LOOK.mermaid)

ID = r"[A-Za-z_][A-Za-z0-9_]*"
QUOTED = r'"[^"]*"'
RESERVED = {
    "end",
    "subgraph",
    "graph",
    "flowchart",
    "style",
    "class",
    "classDef",
    "linkStyle",
    "click",
    "call",
    "default",
    "direction",
}
OPENERS = "|".join(re.escape(a) for a, _ in sorted(SHAPES, key=lambda s: -len(s[0])))
NODE = re.compile(rf"^\s*({ID})({OPENERS})({QUOTED})(\)\]|\]\]|\}}\}}|\)|\])$")
EDGE = re.compile(rf"^\s*({ID}) (-->|-\.->|==>)\|({QUOTED})\| ({ID})$")
SUBGRAPH = re.compile(rf"^\s*subgraph ({ID})\[({QUOTED})\]$")
CSS = r"[a-z-]+:[^,;\s]+(?: [^,;\s]+)*(?:,[a-z-]+:[^,;\s]+(?: [^,;\s]+)*)*"
CLASSDEF = re.compile(rf"^\s*classDef ({ID}) {CSS}$")
CLASS = re.compile(rf"^\s*class ({ID}(?:,{ID})*) ({ID})$")
STYLE = re.compile(rf"^\s*style ({ID}) {CSS}$")
LINKSTYLE = re.compile(rf"^\s*linkStyle (\d+) {CSS}$")


def check(text: str) -> tuple[dict[str, str], list[tuple[str, str, str]], list[str]]:
    """Validate the diagram; return nodes (id -> label), edges and subgraph ids."""
    lines = text.splitlines()
    assert lines[:1] == ["---"] and lines[1].startswith("title: ") and lines[2] == "---"
    assert lines[3] == "flowchart LR"
    nodes: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    subgraphs: list[str] = []
    classdefs: set[str] = set()
    depth = 0
    pending: list[tuple[str, re.Match[str]]] = []
    for ln in lines[4:]:
        assert ln == ln.rstrip(), f"trailing space: {ln!r}"
        if m := SUBGRAPH.match(ln):
            assert m[1] not in RESERVED and m[1] not in subgraphs
            subgraphs.append(m[1])
            depth += 1
        elif ln.strip() == "end":
            depth -= 1
            assert depth >= 0, "unbalanced end"
        elif m := NODE.match(ln):
            opener = m[2]
            closer = dict(SHAPES)[opener]
            assert m[4] == closer, f"shape {opener}..{m[4]} in {ln!r}"
            assert m[1] not in RESERVED and m[1] not in nodes, ln
            nodes[m[1]] = m[3]
        elif m := EDGE.match(ln):
            edges.append((m[1], m[4], m[3]))
        elif m := CLASSDEF.match(ln):
            classdefs.add(m[1])
        elif (m := CLASS.match(ln)) or (m := STYLE.match(ln)) or (m := LINKSTYLE.match(ln)):
            pending.append((ln.split()[0], m))
        else:
            raise AssertionError(f"not Mermaid flowchart syntax we emit: {ln!r}")
    assert depth == 0, "unclosed subgraph"
    for src, dst, _ in edges:
        assert src in nodes and dst in nodes, (src, dst)
    for kind, m in pending:
        if kind == "class":
            assert set(m[1].split(",")) <= set(nodes) and m[2] in classdefs
        elif kind == "style":
            assert m[1] in subgraphs
        else:
            assert int(m[1]) < len(edges)
    return nodes, edges, subgraphs


def counts_match(view: View, text: str) -> None:
    nodes, edges, subgraphs = check(text)
    assert len(nodes) == len(view.nodes)
    assert len(edges) == len(view.edges)
    assert len(subgraphs) == sum(1 for b in view.root.walk() if b.kind != "root")
    assert [lbl for *_, lbl in edges] == [f'"{e.label}"' for e in view.edges]


@pytest.mark.parametrize("name", sorted(SEEDS))
@pytest.mark.parametrize(
    "opts", [ViewOptions(), ViewOptions(expand=True), ViewOptions(show_disabled=True)]
)
def test_every_seed_is_wellformed_mermaid(name: str, opts: ViewOptions) -> None:
    program = SEEDS[name]()
    view = build_view(program, opts)
    text = to_mermaid(view)
    counts_match(view, text)
    assert text == to_mermaid(build_view(SEEDS[name](), opts))
    if opts.expand:
        assert len(check(text)[0]) == len(program.nodes)
        assert len(check(text)[1]) == len(program.edges)


def test_collapsed_mermaid_shows_fan() -> None:
    view = build_view(acme_distributed(num_actors=64))
    text = to_mermaid(view)
    counts_match(view, text)
    assert '"actor \u00d764<br/>32 procs \u00d7 2 threads"' in text
    assert text.count("variable_source \u00d732 · round-robin") == 2
    assert "class n_group_actor__ many" in text


def test_shapes_and_colocation_boxes() -> None:
    text = to_mermaid(build_view(acme_colocated()))
    assert 'n_replay[("replay<br/>dqn:make_replay_tables")]' in text
    assert 'n_counter{{"counter<br/>nodes:Counter"}}' in text
    assert 'subgraph c_host_gpu_host["host placement: gpu_host"]' in text
    styles = {ln.split()[1]: ln for ln in text.splitlines() if ln.startswith("  style ")}
    assert "stroke-dasharray" in styles["c_host_gpu_host"]
    assert "fill:#fff8e1" in styles["c_host_gpu_host_threads_learner_replay"]
    assert "dasharray" not in styles["c_host_gpu_host_threads_learner_replay"]


def test_awkward_names_are_escaped() -> None:
    view = build_view(awkward_program(), ViewOptions(expand=True))
    text = to_mermaid(view)
    nodes, edges, _ = check(text)
    assert "n_end" in nodes  # a node named like a keyword gets a safe id
    assert ("n_a_b_0", "n_end", '"x#quot;y"') in edges
    assert ("n_a_b_0", "n_end", '"k#lt;b#gt;[0]"') in edges
    assert 'title: "odd \\"name\\" \\\\ {x}"' in text
