"""``topo diff A B`` with the real CLI: files and runs (a detached threads run, its
directory, its id, ``runs/latest``), ``-p``, ``--json``, and diff's exit codes: 0 equal,
1 different, 2 on trouble."""

from __future__ import annotations

import json
import os
import signal
import textwrap
from pathlib import Path

import pytest

from tests.cli.operate import ROOT, run_detached, run_pids, status, topo
from topo.testing import wait_gone

ACME = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
TICKERS = """\
name: tickers
params:
  n: {default: 2}
nodes:
  ticker:
    target: tests.cli.ticker:Ticker
    count: ${n}
    args: {name: t, fail: false}
"""


def _file(tmp_path: Path, name: str, text: str = TICKERS) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_equal_files_exit_0_and_different_ones_1(tmp_path: Path) -> None:
    a = _file(tmp_path, "a.yaml")
    b = _file(tmp_path, "b.yaml", TICKERS.replace("{default: 2}", "{default: 3}"))
    same = topo("diff", str(a), str(a), cwd=tmp_path)
    assert (same.returncode, same.stdout, same.stderr) == (0, "No differences.\n", "")
    other = topo("diff", str(a), str(b), cwd=tmp_path)
    assert other.returncode == 1, other.stderr
    assert other.stdout.splitlines() == [
        "~ program",
        "    ~ params.n: 2 → 3",
        "~ group ticker  count 2 → 3",
        "    + ticker/2",
        "Plan: 1 group changed; 1 node to start, 0 to restart, 0 to stop.",
    ]
    # -p applies to every file operand: the same file with the same values is equal
    both = topo("diff", str(a), str(a), "-p", "n=8", cwd=tmp_path)
    assert both.returncode == 0, both.stdout + both.stderr


def test_json_and_a_recorded_program_against_a_file_with_p(tmp_path: Path) -> None:
    recorded = topo("plan", str(ACME), "-p", "num_actors=4", "--json", cwd=tmp_path)
    assert recorded.returncode == 0, recorded.stderr
    (tmp_path / "program.json").write_text(recorded.stdout)
    shown = topo(
        "diff", "program.json", str(ACME), "-p", "num_actors=4", "-p", "num_learners=2",
        cwd=tmp_path,
    )  # fmt: skip
    assert shown.returncode == 1, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[:4] == [
        "~ program",
        "    ~ params.num_learners: 1 → 2",
        "~ group secondary_learner  count 0 → 1",
        "    + secondary_learner/0",
    ]
    assert "~ group actor" in lines
    assert (
        "    ~ actor/1, actor/3  variable_source: @learner → @secondary_learner/0  (round_robin)"
        in lines
    )
    assert lines[-1] == "Plan: 2 groups changed; 1 node to start, 2 to restart, 0 to stop."

    as_json = topo("diff", "program.json", str(ACME), "-p", "num_actors=8", "--json", cwd=tmp_path)
    assert as_json.returncode == 1, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["equal"] is False
    assert data["start"] == [f"actor/{i}" for i in range(4, 8)]
    [actor] = [g for g in data["groups"] if g["group"] == "actor"]
    assert actor["count"] == [4, 8] and actor["op"] == "~"
    change = actor["nodes"][0]["changes"][0]
    assert change == {
        "path": "num_actors",
        "op": "~",
        "old": 4,
        "new": 8,
        "needs_restart": True,
        "via": "",
    }


@pytest.mark.slow
def test_a_run_against_files(tmp_path: Path) -> None:
    file = _file(tmp_path, "tickers.yaml")
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "threads")
    pids = run_pids(run_dir)
    try:
        live = topo("diff", run_id, str(file), cwd=tmp_path)  # a running run, by its id
        assert (live.returncode, live.stdout) == (0, "No differences.\n"), live.stderr
        stopped = topo("stop", run_id, cwd=tmp_path)
        assert stopped.returncode == 0, stopped.stderr
        assert not wait_gone(pids, 20)
        assert status(run_dir)["state"] == "ended"
        grown = topo("diff", str(run_dir), str(file), "-p", "n=4", cwd=tmp_path)
        assert grown.returncode == 1, grown.stderr
        assert "    + ticker/2, ticker/3" in grown.stdout.splitlines()
        latest = topo("diff", str(file), "runs/latest", cwd=tmp_path)
        assert latest.returncode == 0, latest.stdout + latest.stderr
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_trouble_exits_2_with_one_line_or_positioned_diagnostics(tmp_path: Path) -> None:
    good = _file(tmp_path, "good.yaml")
    missing = topo("diff", "nope.yaml", str(good), cwd=tmp_path)
    assert missing.returncode == 2 and missing.stdout == ""
    assert missing.stderr.strip() == "error: nope.yaml: does not exist"
    no_run = topo("diff", str(good), "zz9", cwd=tmp_path)
    assert no_run.returncode == 2 and len(no_run.stderr.strip().splitlines()) == 1
    assert "zz9" in no_run.stderr and "topo ps -a" in no_run.stderr
    (tmp_path / "empty").mkdir()
    empty = topo("diff", "empty", str(good), cwd=tmp_path)
    assert empty.returncode == 2 and "empty: has no program.json" in empty.stderr
    (tmp_path / "old.json").write_text('{"version": 1, "name": "x"}')
    old = topo("diff", "old.json", str(good), cwd=tmp_path)
    assert old.returncode == 2 and len(old.stderr.strip().splitlines()) == 1
    assert "old.json: cannot read the recorded program" in old.stderr
    assert "version 1" in old.stderr
    bad = _file(tmp_path, "bad.yaml", TICKERS.replace("count: ${n}", "count: ${n +}"))
    broken = topo("diff", str(good), str(bad), cwd=tmp_path)
    assert broken.returncode == 2 and broken.stdout == ""
    assert f"{bad}:7:" in broken.stderr or "bad.yaml:7:" in broken.stderr, broken.stderr
