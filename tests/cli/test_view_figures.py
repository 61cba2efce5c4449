"""The live table shows metric values at any width: a figure's value is never cut (its
name is, or a short name is shown), the executable column only when it says something,
and the lines the nodes print during the stop come whole under the final table."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from tests.cli.test_view_layout import Source
from topo.backends.base import Event
from topo.cli.view import TableView
from topo.cli.view_figures import Figure, figures, fit
from topo.cli.view_layout import layout
from topo.cli.view_table import Shape, plain, table_lines
from topo.ir import Program
from topo.runs.node_status import NodeStatus

FINAL = "final evaluation return: 213.4 (mean of the last 10 episodes, greedy policy; whole)"
ACTOR = {
    "episode_return": 187.34,
    "episode_length": 240,
    "epsilon": 0.05,
    "steps": 4600,
    "steps_per_s": 1234.5,
}
EVALUATOR = {"mean_return": 213.4, "actor_steps": 12_000, "learner_steps": 3000, "elapsed_s": 4.2}


def test_short_names_unless_two_figures_share_one() -> None:
    found = figures(ACTOR)
    assert [(f.name, f.short, f.value) for f in found] == [
        ("episode_return", "return", "187.3"),
        ("steps/s", "steps/s", "1.23k"),
        ("steps", "steps", "4.6k"),
    ]
    shown = figures(EVALUATOR, limit=None)
    assert [f.short for f in shown] == ["return", "actor_steps", "learner_steps", "elapsed_s"]


def test_fit_keeps_values_whole_and_drops_names_and_figures_first() -> None:
    found = figures(ACTOR)
    assert fit(found, 200) == "episode_return 187.3 · steps/s 1.23k · steps 4.6k"
    assert fit(found, 42) == "return 187.3 · steps/s 1.23k · steps 4.6k"
    assert fit(found, 36) == "episode_return 187.3 · steps/s 1.23k"
    assert fit(found, 20) == "episode_return 187.3"
    assert fit(found, 12) == "return 187.3"
    assert fit(found, 9) == "re… 187.3"  # the name is cut, never the value
    assert fit([Figure("loss", "loss", "0.01235")], 7) == "0.01235"
    assert fit([], 10) == ""


def test_the_metrics_column_is_served_before_the_last_line() -> None:
    wants = {"node": 9, "state": 7, "restarts": 8, "metrics": 49, "last log line": 40}
    least = {"metrics": 12}
    # room for every figure with short names (36) before the last line gets more than 16
    widths = layout(wants, 90, least, {"metrics": 36})
    assert widths["metrics"] == 36 and widths["last log line"] == 90 - 9 - 7 - 8 - 36 - 12
    assert layout(wants, 200, least, {"metrics": 36})["metrics"] == 49
    narrow = layout(wants, 50, least, {"metrics": 36})
    assert list(narrow) == ["node", "state", "restarts", "metrics"]  # the return stays


def _acme(write_topo: Callable[..., Path], compile_path: Callable[..., Program]) -> Source:
    program = compile_path(
        write_topo("""
        name: acme_like
        nodes:
          learner: {target: "m:Learner"}
          actor: {target: "m:Actor", count: 2}
          evaluator: {target: "m:Evaluator"}
        """)
    )
    now = time.time()
    nodes = {
        n.id: NodeStatus(n.id, n.executable, "running", 4242, 0, now - 5) for n in program.nodes
    }
    for actor in ("actor/0", "actor/1"):
        nodes[actor].metrics = dict(ACTOR)
        nodes[actor].last_line = "episode 12 return 187.3 after 240 steps, epsilon 0.05"
    nodes["evaluator"].metrics = dict(EVALUATOR)
    nodes["evaluator"].last_line = "evaluated 10 episodes"
    return Source(program, nodes)


def _row(text: str, node: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(f"{node} "))


@pytest.mark.parametrize("width", [80, 120, 200])
def test_every_width_shows_the_return_and_no_executable_column_of_node_names(
    write_topo: Callable[..., Path], compile_path: Callable[..., Program], width: int
) -> None:
    source = _acme(write_topo, compile_path)
    console = Console(width=width, height=40, record=True, force_terminal=False)
    console.print(TableView(source, console, live=False).render())
    text = console.export_text()
    assert all(len(line) < width for line in text.splitlines()), text
    header = next(line for line in text.splitlines() if line.startswith("node "))
    assert "executable" not in header and "metrics" in header, text
    for actor in ("actor/0", "actor/1"):
        assert "return 187.3" in _row(text, actor), text
    assert "return 213.4" in _row(text, "evaluator"), text
    if width >= 120:
        assert "steps/s 1.23k" in _row(text, "actor/0"), text
    if width >= 200:
        assert "episode_return 187.3" in _row(text, "actor/0"), text
        assert "mean_return 213.4" in _row(text, "evaluator"), text


def test_the_executable_column_shows_where_executables_hold_several_nodes(
    write_topo: Callable[..., Path], compile_path: Callable[..., Program]
) -> None:
    program = compile_path(
        write_topo("""
        name: packed
        nodes:
          actor: {target: "m:Actor", count: 4, colocate: {per_process: 2}}
        """)
    )
    nodes = {n.id: NodeStatus(n.id, n.executable, "running", 7) for n in program.nodes}
    assert any(st.exe != st.id for st in nodes.values())
    lines = [plain(line) for line in table_lines(Source(program, nodes), Shape(200, 40))]
    assert "executable" in lines[1]
    wide = [plain(line) for line in table_lines(_single(program), Shape(None, None, wide=True))]
    assert "executable" in wide[1]  # --wide: every column, even one that repeats the node


def _single(program: Program) -> Source:
    return Source(program, {"a": NodeStatus("a", "a", "running", 1)})


def test_piped_rows_are_whole_and_have_no_trailing_spaces(
    write_topo: Callable[..., Path], compile_path: Callable[..., Program]
) -> None:
    source = _acme(write_topo, compile_path)
    source.nodes["evaluator"].last_line = FINAL
    lines = [plain(line) for line in table_lines(source, Shape(None, None))]
    assert all(line == line.rstrip() for line in lines)
    assert "pid" in lines[1] and FINAL in _row("\n".join(lines), "evaluator")
    assert "episode_return 187.3 · steps/s 1.23k · steps 4.6k" in _row("\n".join(lines), "actor/0")


def test_lines_printed_during_the_stop_come_whole_after_the_final_table(
    write_topo: Callable[..., Path], compile_path: Callable[..., Program]
) -> None:
    source = _acme(write_topo, compile_path)
    source.nodes[
        "learner"
    ].last_line = "learner done after 1234 steps: loss 0.0123 (this line is long)"
    console = Console(width=80, height=40, record=True, force_terminal=False)
    view = TableView(source, console, live=False)
    view(Event("log", "evaluator", message="evaluated 10 episodes"))  # before the stop
    view(Event("stopping", "learner", message="learner finished"))  # the learner's end
    source.nodes["evaluator"].last_line = FINAL
    view(Event("log", "evaluator", message=FINAL))
    console.print(view.render())
    view.close()
    text = console.export_text()
    lines = text.splitlines()
    assert f"evaluator | {FINAL}" in lines, text  # whole, not cut to the column
    assert "learner   | learner done after 1234 steps: loss 0.0123 (this line is long)" in lines
    assert not any(line.startswith("evaluator | evaluated") for line in lines)  # before it
    assert lines.index(f"evaluator | {FINAL}") > lines.index(_row(text, "evaluator"))
