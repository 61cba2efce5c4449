"""``topo apply RUN FILE`` with the real CLI on a detached run: the plan, the change made
while the run goes on, ``--dry-run``, refusals and bad files (exit 1, nothing changed),
the record in the run directory, ``topo ps`` showing the generation, and ``topo diff``
of the run against the file it now runs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.cli.operate import run_detached, run_pids, status, topo
from topo.testing import wait_gone

TICKERS = """\
name: tickers
params:
  n: {default: 2}
nodes:
  ticker:
    target: tests.cli.ticker:Ticker
    count: ${n}
    args: {name: t}
"""


@pytest.mark.slow
def test_apply_changes_a_detached_run_and_records_it(tmp_path: Path) -> None:
    file = tmp_path / "tickers.yaml"
    file.write_text(TICKERS)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    first = {n["id"]: n["pid"] for n in status(run_dir)["nodes"]}
    pids = run_pids(run_dir)
    try:
        dry = topo("apply", run_id, str(file), "-p", "n=4", "--dry-run", cwd=tmp_path)
        assert dry.returncode == 0, dry.stderr
        assert "+ ticker/2, ticker/3" in dry.stdout and "2 nodes to start" in dry.stdout
        assert "dry run: nothing changed" in dry.stderr
        assert status(run_dir)["generation"] == 0

        bad = tmp_path / "bad.yaml"
        bad.write_text(TICKERS.replace("args: {name: t}", "args: {name: t, nope: 1}"))
        wrong = topo("apply", run_id, str(bad), cwd=tmp_path)
        assert wrong.returncode == 1 and "bad.yaml:8:" in wrong.stderr, wrong.stderr
        assert "Traceback" not in wrong.stderr

        other = tmp_path / "other.yaml"
        other.write_text(TICKERS.replace("name: tickers", "name: other"))
        refused = topo("apply", run_id, str(other), cwd=tmp_path)
        assert refused.returncode == 1 and "name changes" in refused.stderr, refused.stderr

        done = topo("apply", run_id, str(file), "-p", "n=4", cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "✓ started ticker/2, ticker/3" in done.stderr and "change 1 applied" in done.stderr
        now = {n["id"]: n["pid"] for n in status(run_dir)["nodes"]}
        assert sorted(now) == ["ticker/0", "ticker/1", "ticker/2", "ticker/3"]
        assert {k: now[k] for k in first} == first  # the running tickers were not touched
        pids |= run_pids(run_dir)

        listed = topo("ps", cwd=tmp_path).stdout
        assert "running (gen 1)" in listed, listed
        same = topo("diff", run_id, str(file), "-p", "n=4", cwd=tmp_path)
        assert same.returncode == 0 and "No differences." in same.stdout, same.stdout
        record = json.loads((run_dir / "changes" / "1.json").read_text())
        assert record["result"] == "applied" and record["source"]["params_given"] == ["n=4"]
        assert json.loads((run_dir / "run.json").read_text())["params"]["n"] == 4
        assert "ticker/3" in (run_dir / "program.json").read_text()

        same = topo("apply", run_id, str(file), cwd=tmp_path)  # the run's n=4 carried
        assert same.returncode == 0 and "No differences." in same.stdout, same.stderr
        assert "n=4 (carried from run" in same.stdout
        down = topo("apply", run_id, str(file), "--reset-params", "--json", cwd=tmp_path)
        assert down.returncode == 0, down.stderr  # back to the file's n=2
        answer = json.loads(down.stdout)
        assert (
            answer["stop"] == ["ticker/2", "ticker/3"] and answer["record"]["result"] == "applied"
        )
    finally:
        topo("stop", run_id, cwd=tmp_path)
    assert not wait_gone(pids, 30)


def test_apply_to_a_run_that_is_not_running_is_an_error(tmp_path: Path) -> None:
    file = tmp_path / "t.yaml"
    file.write_text(textwrap.dedent(TICKERS))
    missing = topo("apply", "no-such-run", str(file), cwd=tmp_path)
    assert missing.returncode == 1 and "error:" in missing.stderr
    assert "Traceback" not in missing.stderr
