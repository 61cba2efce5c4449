"""``--metrics-to csv,tensorboard``: the nodes' metric rows also as CSV files and as
TensorBoard event files, read back with TensorBoard's own reader.

The node code is in this module (``test_metrics_out:...``), as in test_metrics_run."""

from __future__ import annotations

import csv
import importlib.util
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import topo
from topo.supervisor.metrics_out import CsvOut, TensorBoardOut, crc32c, masked_crc

needs_tensorboard = pytest.mark.skipif(
    importlib.util.find_spec("tensorboard") is None, reason="needs tensorboard (the rl extra)"
)


def learn(steps: int = 4) -> None:
    """A py node: a learner-like curve (``learner_steps`` its step) and one evaluation."""
    log = topo.metrics.logger("learner")
    for i in range(1, steps + 1):
        log.write({"loss": 1.0 / i, "learner_steps": 10 * i})
    topo.metrics.logger("evaluator").write({"mean_return": 42.5, "actor_steps": 900})


def _program(tmp_path: Path) -> Path:
    """A one-node topology whose node is ``learn``."""
    path = tmp_path / "curves.yaml"
    path.write_text(
        'name: curves\nnodes:\n  learner: {kind: py, target: "test_metrics_out:learn"}\n'
    )
    return path


def _scalars(directory: Path) -> dict[str, list[tuple[int, float]]]:
    """Every scalar of the event files under ``directory``, read by TensorBoard."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(directory))
    acc.Reload()
    return {
        tag: [(e.step, round(e.value, 5)) for e in acc.Scalars(tag)]
        for tag in acc.Tags()["scalars"]
    }


def test_the_frames_carry_castagnoli_crcs() -> None:
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value
    assert crc32c(b"") == 0
    assert masked_crc(b"") == 0xA282EAD8  # the mask alone, for an empty payload


@needs_tensorboard
def test_tensorboard_reads_each_figure_at_its_rows_step(tmp_path: Path) -> None:
    out = TensorBoardOut(tmp_path)
    rows: list[dict[str, Any]] = [
        {"time": 1.0, "node": "actor/0", "label": "actor", "episode_return": 9.0, "steps": 30},
        {"time": 2.0, "node": "actor/0", "label": "actor", "episode_return": 21.0, "steps": 51.0},
        {"time": 3.0, "node": "actor/0", "label": "actor", "episode_return": 35.5, "done": True},
        {"time": 4.0, "node": "learner", "label": "learner", "loss": 0.25, "note": "text"},
    ]
    for row in rows:
        out.write(row)
    out.close()
    actor = _scalars(tmp_path / "actor_0")
    # its own step where the row has one, else the count of its label's rows before it
    assert actor["actor/episode_return"] == [(30, 9.0), (51, 21.0), (2, 35.5)]
    assert actor["actor/done"] == [(2, 1.0)]
    assert actor["actor/steps"] == [(30, 30.0), (51, 51.0)]
    assert _scalars(tmp_path / "learner") == {"learner/loss": [(0, 0.25)]}  # no text


def test_a_csv_file_per_node_and_label_widens_for_a_new_column(tmp_path: Path) -> None:
    out = CsvOut(tmp_path)
    out.write({"time": 1.0, "node": "actor/1", "label": "actor", "ret": 9.0, "len": 9})
    out.write({"time": 2.0, "node": "actor/1", "label": "actor", "ret": 20.0, "len": 20})
    out.write({"time": 2.5, "node": "actor/1", "label": "timing", "sps": 100.0})
    out.flush()
    with open(tmp_path / "actor_1.actor.csv", newline="") as f:
        assert list(csv.reader(f)) == [
            ["time", "ret", "len"],
            ["1.0", "9.0", "9"],
            ["2.0", "20.0", "20"],
        ]
    out.write({"time": 3.0, "node": "actor/1", "label": "actor", "ret": 31.0, "eps": None, "x": 1})
    out.close()
    with open(tmp_path / "actor_1.actor.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0]) == ["time", "ret", "len", "eps", "x"]
    assert [r["ret"] for r in rows] == ["9.0", "20.0", "31.0"]
    assert rows[0]["x"] == "" and rows[2]["x"] == "1" and rows[2]["len"] == ""
    assert (tmp_path / "actor_1.timing.csv").read_text().splitlines() == ["time,sps", "2.5,100.0"]


@needs_tensorboard
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_a_run_asked_for_csv_and_tensorboard_writes_both(
    topo_launch: Callable, tmp_path: Path, backend: str
) -> None:
    run = topo_launch(_program(tmp_path), backend, metrics_to=["tensorboard", "csv"])
    assert run.wait(60) == 0
    metrics = run.run_dir / "metrics"
    assert (metrics / "learner.jsonl").is_file()  # JSON lines as always
    with open(metrics / "csv" / "learner.learner.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(r["loss"], r["learner_steps"]) for r in rows] == [
        ("1.0", "10"),
        ("0.5", "20"),
        ("0.3333333333333333", "30"),
        ("0.25", "40"),
    ]
    scalars = _scalars(metrics / "tensorboard" / "learner")
    assert scalars["learner/loss"] == [(10, 1.0), (20, 0.5), (30, 0.33333), (40, 0.25)]
    assert scalars["evaluator/mean_return"] == [(900, 42.5)]
    record = json.loads((run.run_dir / "run.json").read_text())
    assert record["metrics_to"] == ["csv", "tensorboard"]


def test_a_run_not_asked_writes_json_lines_only(topo_launch: Callable, tmp_path: Path) -> None:
    run = topo_launch(_program(tmp_path))
    assert run.wait(60) == 0
    assert sorted(p.name for p in (run.run_dir / "metrics").iterdir()) == ["learner.jsonl"]


def test_an_unknown_format_is_refused_before_anything_starts(
    run_topo: Callable, tmp_path: Path
) -> None:
    path = _program(tmp_path)
    result = run_topo("run", path, "--metrics-to", "csv,wandb", "--log-dir", tmp_path / "runs")
    assert result.exit_code == 2, result.output
    assert "--metrics-to: unknown format 'wandb' (choose from csv, tensorboard)" in result.output
    assert not (tmp_path / "runs").exists()
    with pytest.raises(ValueError, match="metrics_to: unknown format 'tb'"):
        topo.launch(path, metrics_to=["tb"], log_dir=tmp_path / "runs")
