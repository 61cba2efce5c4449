"""The live table's layout without a run: columns at several widths, rows collapsed by
group, the state cell's phases and the title, read through a plain ``RunSource``."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from topo.cli.view import RunSource, TableView
from topo.cli.view_layout import KEPT, layout, total_width
from topo.cli.view_rows import limiter_text, table_rows
from topo.ir import Program
from topo.supervisor.phases import LimiterProgress, limiter_progress, peers_of, starting_phase
from topo.supervisor.state import NodeStatus

WANTS = {
    "node": 12,
    "executable": 12,
    "state": 34,  # starting 0:05 · waiting for replay
    "pid": 7,
    "restarts": 8,
    "uptime": 7,
    "metrics": 40,
    "last log line": 120,
}


def test_wide_terminals_show_every_column_and_give_the_rest_to_the_last_line() -> None:
    widths = layout(WANTS, 300)
    assert list(widths) == list(WANTS)
    assert total_width(widths) == 300
    assert widths["last log line"] >= 120  # never capped at some fixed width


def test_narrow_terminals_keep_node_state_and_restarts() -> None:
    for width in (40, 60, 80, 100, 120, 160):
        widths = layout(WANTS, width)
        assert all(c in widths for c in KEPT), (width, widths)
        assert total_width(widths) <= width, (width, widths)
        assert widths["node"] == 12  # ids are never cut while there is room for them
        if width >= 80:
            assert widths["state"] == 34
    # the metrics (the return) stay when the last line has no room left
    assert list(layout(WANTS, 80)) == ["node", "state", "restarts", "metrics"]
    assert list(layout({**WANTS, "state": 14}, 80)) == [
        *("node", "state", "restarts", "metrics", "last log line")
    ]
    at_120 = layout(WANTS, 120)
    assert "pid" in at_120 and "uptime" in at_120 and "executable" not in at_120
    assert at_120["metrics"] >= 16 and at_120["last log line"] >= 16


def test_metrics_and_last_line_shrink_before_anything_is_dropped() -> None:
    widths = layout(WANTS, 160)
    assert list(widths) == list(WANTS)
    assert widths["metrics"] < 40 or widths["last log line"] < 120


@dataclass
class Source:
    """A run as ``topo attach`` would read it back: plain values."""

    program: Program
    nodes: dict[str, NodeStatus]
    backend_name: str = "threads"
    run_dir: Path = Path("runs/r")
    grace_s: float = 5.0
    stopping_since: float | None = None
    limiter: LimiterProgress | None = None
    generation: int = 0
    hosts: dict[str, str] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)

    @property
    def program_name(self) -> str:
        return self.program.name

    def location(self, exe_id: str) -> str | None:
        return self.hosts.get(exe_id)

    def device(self, exe_id: str) -> str | None:
        return self.devices.get(exe_id)


def _source(write_topo: Callable[..., Path], compile_path: Callable[..., Program]) -> Source:
    program = compile_path(
        write_topo("""
        name: big
        nodes:
          learner: {target: "m:Learner"}
          replay: {target: "m:Replay"}
          actor: {target: "m:Actor", count: 64, args: {replay: "@replay"}}
        """)
    )
    now = time.time()
    nodes = {n.id: NodeStatus(n.id, n.executable, "running", 1, 0, now - 5) for n in program.nodes}
    nodes["actor/7"].state = "restarting"
    nodes["actor/7"].restarts = 1
    nodes["actor/9"].stalled_s = 70.0
    return Source(program, nodes)


def test_groups_collapse_when_the_nodes_do_not_fit(
    write_topo: Callable[..., Path], compile_path: Callable[..., Program]
) -> None:
    source = _source(write_topo, compile_path)
    checked: RunSource = source  # the protocol is all the view needs
    assert len(table_rows(checked, 100, {})) == 66  # all fit: one row each
    rows = table_rows(source, 20, {})
    assert [r.node for r in rows] == ["actor/7", "actor/9", "learner", "replay", "actor ×64"]
    assert rows[0].state == "restarting" and rows[0].restarts == "1"
    assert rows[1].state == "running · stalled 1:10"
    assert rows[-1].state == "63 running, 1 restarting, 1 stalled"
    assert rows[-1].restarts == "1"
    tiny = table_rows(source, 3, {})
    assert [r.node for r in tiny] == ["actor/7", "actor/9", "… 3 more"]


def test_state_cells_and_title_say_the_phase(
    write_topo: Callable[..., Path], compile_path: Callable[..., Program]
) -> None:
    source = _source(write_topo, compile_path)
    now = time.time()
    actor = source.nodes["actor/0"]
    actor.state, actor.started, actor.phase = "starting", now - 5, "waiting for replay"
    rows = {r.node: r for r in table_rows(source, 100, {}, now)}
    assert rows["actor/0"].state == "starting 0:05 · waiting for replay"
    source.stopping_since = now - 3
    source.limiter = LimiterProgress("coordinator", "actor_steps", 47100, 50000, 20.4)
    console = Console(width=80, record=True, force_terminal=False)
    view = TableView(source, console, live=False)
    console.print(view.render())
    text = console.export_text()
    assert "big — threads · stopping 0:03/0:05 · actor_steps 47.1k/50k · ~20 s" in text
    assert "stopping 0:03/0:05" in next(line for line in text.splitlines() if "learner" in line)
    assert max(len(line) for line in text.splitlines()) < 80


def test_limiter_progress_comes_from_the_limiters_metrics() -> None:
    nodes = {"c": NodeStatus("c", "c"), "lim": NodeStatus("lim", "lim")}
    assert limiter_progress(nodes) is None
    nodes["lim"].metrics = {"limit_key": "actor_steps", "actor_steps": 900, "limit": 1000}
    progress = limiter_progress(nodes)
    assert progress == LimiterProgress("lim", "actor_steps", 900, 1000, None)
    assert progress is not None and limiter_text(progress) == "actor_steps 900/1k"
    assert (
        limiter_text(LimiterProgress("l", "steps", 12, 50000, 4000.0)) == "steps 12/50k · ~1:06:40"
    )


def test_starting_phase_names_the_awaited_peer(
    write_topo: Callable[..., Path], compile_path: Callable[..., Program]
) -> None:
    peers = peers_of(_source(write_topo, compile_path).program)
    assert peers["actor/3"] == ("replay",)
    assert starting_phase(None, peers["actor/3"], {"replay"}) == "waiting for its process"
    assert starting_phase(42, peers["actor/3"], {"replay"}) == "waiting for replay"
    assert starting_phase(42, peers["actor/3"], {"learner"}) == "building"


def test_a_node_s_row_says_its_host_and_accelerators(
    write_topo: Callable[..., Path], compile_path: Callable[..., Program]
) -> None:
    source = _source(write_topo, compile_path)
    source.hosts = {"learner": "h2", "actor/0": "h1"}
    source.devices = {"learner": "gpu 0,1"}
    rows = {r.node: r for r in table_rows(source, 100, {})}
    assert rows["learner"].pid == "1@h2 gpu 0,1"
    assert rows["actor/0"].pid == "1@h1" and rows["replay"].pid == "1"
