"""``topo plot RUN_DIR`` on real run directories, its user errors, and ``topo run --plot``.

The node code is in this module (``test_plot:rising``): pytest puts this directory on
``sys.path``, and the subprocess gets it through PYTHONPATH."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import topo
from topo.testing import wait_gone

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TOPO = [sys.executable, "-c", "from topo.cli import main; main()"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TOPOLOGY = """\
name: curves
nodes:
  actor: {kind: py, target: "test_plot:rising", count: 2}
  learner: {kind: py, target: "test_plot:rising", args: {scale: 2.0, label: learner}}
"""


def rising(scale: float = 1.0, label: str = "actor") -> None:
    """A py node: 20 rows of a rising return and a falling loss."""
    log = topo.metrics.logger(label)
    for i in range(20):
        log.write({"episode_return": scale * i, "loss": 1.0 / (i + 1), "actor_steps": 50 * i})


@pytest.fixture
def run_dir(topo_launch: Callable, tmp_path: Path) -> Path:
    """The run directory of a finished run whose three nodes wrote metrics."""
    path = tmp_path / "curves.yaml"
    path.write_text(TOPOLOGY)
    run = topo_launch(path, "threads")
    assert run.wait(60) == 0
    return Path(run.run_dir)


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) of a PNG file, after checking its signature."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def distinct_colours(path: Path) -> int:
    from matplotlib import image

    pixels = image.imread(path)
    return len({tuple(p) for p in pixels.reshape(-1, pixels.shape[-1])[::7]})


def test_plot_writes_learning_curves_next_to_the_run(run_topo: Callable, run_dir: Path) -> None:
    result = run_topo("plot", run_dir)
    assert result.exit_code == 0, result.output
    out = run_dir / "metrics.png"
    assert f"wrote {out}" in result.output
    width, height = png_size(out)
    assert width >= 1000 and height >= 600  # 3 metrics: two columns, two rows
    assert out.stat().st_size > 20_000 and distinct_colours(out) > 20  # lines, not a blank


def test_plot_one_key_against_another_for_some_nodes(
    run_topo: Callable, run_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "return.png"
    result = run_topo(
        "plot", run_dir, "-o", out, "--x", "actor_steps", "--y", "episode_return", "--node", "a*"
    )
    assert result.exit_code == 0, result.output
    assert png_size(out) == (640, 360)  # one subplot
    assert not (run_dir / "metrics.png").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--y", "nope"],
            "unknown --y key 'nope'; numeric keys: episode_return, loss, actor_steps",
        ),
        (["--x", "wall"], "unknown --x key 'wall'"),
        (["--node", "critic*"], "no node matches --node 'critic*'; nodes with metrics: actor/0"),
    ],
)
def test_plot_user_errors_exit_1_without_a_traceback(
    run_topo: Callable, run_dir: Path, args: list[str], message: str
) -> None:
    result = run_topo("plot", run_dir, *args)
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_plot_needs_a_run_directory_with_metrics(run_topo: Callable, tmp_path: Path) -> None:
    missing = run_topo("plot", tmp_path / "nowhere")
    assert missing.exit_code == 1 and "is not a directory" in missing.output
    empty = run_topo("plot", tmp_path)
    assert empty.exit_code == 1 and "has no metrics/ directory" in empty.output
    (tmp_path / "metrics").mkdir()
    (tmp_path / "metrics" / "a.jsonl").write_text("not json\n")
    broken = run_topo("plot", tmp_path)
    assert broken.exit_code == 1 and "holds no metric rows" in broken.output


def test_a_line_cut_short_is_skipped_with_a_warning(run_topo: Callable, run_dir: Path) -> None:
    with open(run_dir / "metrics" / "actor_0.jsonl", "a") as f:
        f.write('{"time": 1.0, "node": "act')  # the launcher died mid-write
    result = run_topo("plot", run_dir)
    assert result.exit_code == 0, result.output
    assert "skipped 1 line(s)" in result.output


def test_without_matplotlib_the_error_says_what_to_install(
    run_topo: Callable, run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    result = run_topo("plot", run_dir)
    assert result.exit_code == 1
    assert "pip install 'topo-launch[plot]'" in result.output
    assert "Traceback" not in result.output


def test_the_cli_does_not_import_matplotlib_unless_plotting() -> None:
    code = (
        "import sys; from topo.cli.app import app; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('matplotlib', 'zmq')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_run_with_plot_shows_figures_and_draws_at_the_stop(tmp_path: Path) -> None:
    (tmp_path / "curves.yaml").write_text(TOPOLOGY)
    run_dir = tmp_path / "run"
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]), NO_COLOR="1", COLUMNS="200"
    )
    done = subprocess.run(
        [
            *TOPO,
            "run",
            "curves.yaml",
            "-b",
            "procs",
            "--run-dir",
            str(run_dir),
            "--no-live",
            "--plot",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    # LinesView: the first figures of each node, once (the next would be 10 s later)
    lines = [x for x in done.stdout.splitlines() if "| metrics: " in x]
    assert len([x for x in lines if x.startswith("learner")]) == 1, done.stdout
    assert "episode_return" in lines[0] and "loss" in lines[0]
    assert f"wrote {run_dir / 'metrics.png'}" in done.stderr
    assert png_size(run_dir / "metrics.png")[0] >= 1000
    status = json.loads((run_dir / "status.json").read_text())
    assert status["nodes"][0]["metrics"]["episode_return"] == 19.0
    assert not wait_gone([n["pid"] for n in status["nodes"] if n["pid"]], 15)
