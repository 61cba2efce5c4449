"""How ``topo run`` shows metric figures: the compact key figures of a node, and the
LinesView's at-most-one metrics line per node every ten seconds."""

from __future__ import annotations

import io
from typing import Any

import pytest
from rich.console import Console

from topo.backends.base import Event
from topo.backends.threads import ThreadsBackend
from topo.cli import view
from topo.cli.view import LinesView, format_number, key_figures
from topo.supervisor.state import NodeStatus


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0"),
        (999, "999"),
        (187.34, "187.3"),
        (3.0, "3"),
        (0.012345, "0.01235"),
        (999.96, "1k"),
        (2134, "2.13k"),
        (12_345, "12.3k"),
        (123_456, "123k"),
        (2_500_000.0, "2.5M"),
        (7e9, "7G"),
        (-3456, "-3.46k"),
    ],
)
def test_numbers_in_three_or_four_significant_digits(value: float, text: str) -> None:
    assert format_number(value) == text


def test_key_figures_prefer_return_loss_and_rates_and_skip_the_stamps() -> None:
    values = {
        "time": 1.7e9,
        "node": "actor/0",
        "label": "actor",
        "lr": 0.001,
        "phase": "warmup",
        "actor_steps": 12_345,
        "steps_per_s": 2134.5,
        "episode_return": 187.34,
    }
    assert key_figures(values) == "episode_return 187.3 · steps/s 2.13k · actor_steps 12.3k"
    assert key_figures({"phase": "warmup", "ok": True, "n": 3}) == "n 3 · phase warmup · ok True"
    assert key_figures({}) == ""


class _Launcher:
    """What LinesView reads of a launcher."""

    def __init__(self) -> None:
        self.nodes = {"actor/0": NodeStatus("actor/0", "actor/0"), "learner": NodeStatus("l", "l")}
        self.backend = ThreadsBackend()  # one host: no host/ prefix

    def location(self, exe_id: str) -> str | None:
        return self.backend.location(exe_id)

    def device(self, exe_id: str) -> str | None:
        return None


def test_lines_view_prints_a_nodes_figures_at_most_every_ten_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [100.0]
    monkeypatch.setattr(view.time, "monotonic", lambda: clock[0])
    out = io.StringIO()
    launcher: Any = _Launcher()
    lines = LinesView(launcher, Console(file=out, width=200, no_color=True))
    for i in range(5):  # five batches within a second
        launcher.nodes["actor/0"].metrics = {"episode_return": float(i)}
        lines(Event("metrics", "actor/0"))
        clock[0] += 0.2
    launcher.nodes["learner"].metrics = {"loss": 0.5}
    lines(Event("metrics", "learner"))
    clock[0] += 10.0
    lines(Event("metrics", "actor/0"))
    assert out.getvalue().splitlines() == [
        "actor/0 | metrics: episode_return 0",
        "learner | metrics: loss 0.5",
        "actor/0 | metrics: episode_return 4",
    ]
