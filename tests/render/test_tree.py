"""The terminal tree: every drawn box and handle appears, nested as in the picture."""

from __future__ import annotations

from render_programs import acme_colocated, acme_distributed
from rich.console import Console

from topo.ir import Program
from topo.render import ViewOptions, build_view, to_tree


def text_of(program: Program, opts: ViewOptions | None = None) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(to_tree(build_view(program, opts)))
    return console.export_text()


def test_tree_lists_every_node_and_handle(seed: Program) -> None:
    out = text_of(seed, ViewOptions(expand=True))
    for n in seed.nodes:
        assert n.id in out
    assert out.count("→ ") == len(seed.edges)


def test_tree_collapsed_fan() -> None:
    out = text_of(acme_distributed(num_actors=64))
    assert "actor \u00d764" in out
    assert "→ learner  variable_source \u00d732 · round-robin" in out
    assert "→ secondary_learner/0  variable_source \u00d732 · round-robin" in out
    assert "collapsed" in out.splitlines()[0]


def test_tree_nests_colocation() -> None:
    lines = text_of(acme_colocated()).splitlines()
    host = next(i for i, ln in enumerate(lines) if "host placement: gpu_host" in ln)
    proc = next(i for i, ln in enumerate(lines) if "process learner_replay" in ln)
    indent = lambda s: len(s) - len(s.lstrip("│├└─ "))  # noqa: E731
    assert proc > host and indent(lines[proc]) > indent(lines[host])


def test_tree_shows_disabled_greyed_only_when_asked() -> None:
    p = acme_distributed(limiter=False)
    assert "steps_limiter" not in text_of(p)
    assert "steps_limiter (disabled)" in text_of(p, ViewOptions(show_disabled=True))
