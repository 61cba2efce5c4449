"""``topo apply RUN FILE`` and ``topo diff RUN FILE`` start from the run's parameters: the
``-p`` values the run was started with (as every applied change left them) are carried,
this command's ``-p`` change them by name, ``--reset-params`` goes back to FILE's
defaults, a carried value FILE no longer declares is dropped with a note; the record
keeps them for the next change and for ``topo run --from``. ``topo apply`` never imports
a node's module (the run's launcher checks the arguments against what its fork server
imported), and its RUN argument is required, as its help says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.operate import env, run_detached, run_pids, status, topo
from topo.testing import wait_gone

TICKERS = """\
name: tickers
params:
  n: {default: 2}
  every: {default: 0.2}
nodes:
  ticker:
    target: tests.cli.ticker:Ticker
    count: ${n}
    args: {name: t, every: "${every}"}
"""


def _given(run_dir: Path) -> list[str]:
    given: list[str] = json.loads((run_dir / "run.json").read_text())["params_given"]
    return given


@pytest.mark.slow
def test_the_runs_parameters_are_carried_changed_by_name_and_reset(tmp_path: Path) -> None:
    file = tmp_path / "tickers.yaml"
    file.write_text(TICKERS)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs", "-p", "n=3")
    pids = run_pids(run_dir)
    try:
        same = topo("diff", run_id, str(file), cwd=tmp_path)  # not `params.n: 3 → 2`
        assert same.returncode == 0, same.stdout + same.stderr
        assert same.stdout.splitlines() == [
            f"Parameters: n=3 (carried from run {run_id})",
            "No differences.",
        ]
        reset = topo("diff", run_id, str(file), "--reset-params", cwd=tmp_path)
        assert reset.returncode == 1 and "    ~ params.n: 3 → 2" in reset.stdout

        slower = topo("apply", run_id, str(file), "-p", "every=0.3", cwd=tmp_path)
        assert slower.returncode == 0, slower.stdout + slower.stderr
        lines = slower.stdout.splitlines()
        assert lines[0] == f"Parameters: every=0.3 (given), n=3 (carried from run {run_id})"
        assert "    ~ params.every: 0.2 → 0.3" in lines and "params.n" not in slower.stdout
        assert "0 to stop" in slower.stdout  # ticker/2 goes on
        assert _given(run_dir) == ["n=3", "every=0.3"]
        record = json.loads((run_dir / "changes" / "1.json").read_text())
        assert record["source"]["params_given"] == ["n=3", "every=0.3"]
        assert record["source"]["params_change"]["carried"] == ["n=3"]
        pids |= run_pids(run_dir)

        # the next change starts from the last one's parameters; a later -p wins
        more = topo("apply", run_id, str(file), "-p", "n=1", "-p", "n=4", cwd=tmp_path)
        assert more.returncode == 0, more.stdout + more.stderr
        assert more.stdout.splitlines()[0] == (
            f"Parameters: n=4 (given), every=0.3 (carried from run {run_id})"
        )
        assert "    + ticker/3" in more.stdout and "params.every" not in more.stdout
        assert _given(run_dir) == ["n=4", "every=0.3"]
        pids |= run_pids(run_dir)

        # a file that no longer declares `every`: its carried value is dropped, with a note
        fixed = tmp_path / "fixed.yaml"
        text = TICKERS.replace("  every: {default: 0.2}\n", "")
        fixed.write_text(text.replace('"${every}"', "0.3"))
        dropped = topo("apply", run_id, str(fixed), "--json", cwd=tmp_path)
        assert dropped.returncode == 0, dropped.stdout + dropped.stderr
        assert "the run's -p every=0.3 is dropped: fixed.yaml declares no parameter 'every'" in (
            dropped.stderr
        )
        assert _given(run_dir) == ["n=4"]

        back = topo("apply", run_id, str(file), "--reset-params", cwd=tmp_path)
        assert back.returncode == 0, back.stdout + back.stderr
        assert back.stdout.splitlines()[0] == (
            "Parameters: the file's defaults (--reset-params; not carried: n=4)"
        )
        assert "    - ticker/2, ticker/3" in back.stdout
        assert _given(run_dir) == []
        assert sorted(n["id"] for n in status(run_dir)["nodes"]) == ["ticker/0", "ticker/1"]
    finally:
        topo("stop", run_id, cwd=tmp_path)
    assert not wait_gone(pids, 30)


@pytest.mark.slow
def test_a_rerun_keeps_the_parameters_a_change_left(tmp_path: Path) -> None:
    """``topo run --from`` (and so ``--resume``) of a changed run: the new run carries
    the -p values as they were at its end, and apply/diff start from them."""
    file = tmp_path / "tickers.yaml"
    file.write_text(TICKERS)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "threads", "-p", "n=3")
    try:
        done = topo("apply", run_id, str(file), "-p", "every=0.3", cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    finally:
        assert topo("stop", run_id, cwd=tmp_path).returncode == 0
    again_id, again_dir = run_detached(tmp_path, "--from", str(run_dir), "-p", "every=0.25")
    try:
        assert _given(again_dir) == ["n=3", "every=0.25"]
        same = topo("diff", again_id, str(file), cwd=tmp_path)
        assert same.returncode == 0, same.stdout + same.stderr
        assert same.stdout.splitlines()[-1] == "No differences."
    finally:
        assert topo("stop", again_id, cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_apply_never_imports_a_nodes_module_and_still_checks_its_arguments(
    tmp_path: Path,
) -> None:
    """The run's fork server imported the targets; the command only asks for them."""
    file = tmp_path / "tickers.yaml"
    file.write_text(TICKERS)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    try:
        command = ["-X", "importtime", "-m", "topo", "apply", run_id, str(file), "-p", "n=3"]
        done = subprocess.run(
            [sys.executable, *command],
            cwd=tmp_path,
            env=env(tmp_path),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "change 1 applied" in done.stderr
        imported = {
            line.rsplit("|", 1)[1].strip()
            for line in done.stderr.splitlines()
            if line.startswith("import time:")
        }
        assert "topo.loader" in imported  # (what -X importtime shows)
        frameworks = ("tests.cli.ticker", "tensorflow", "reverb", "jax", "zmq")
        assert not [m for m in imported if m.split(".")[0] in frameworks or m in frameworks]
        pids |= run_pids(run_dir)
        bad = tmp_path / "bad.yaml"
        bad.write_text(TICKERS.replace("args: {name: t,", "args: {nope: 1, name: t,"))
        wrong = topo("apply", run_id, str(bad), cwd=tmp_path)
        assert wrong.returncode == 1, wrong.stdout + wrong.stderr
        assert "bad.yaml:9:" in wrong.stderr and "takes no argument 'nope'" in wrong.stderr
        assert "Traceback" not in wrong.stderr and status(run_dir)["generation"] == 1
    finally:
        topo("stop", run_id, cwd=tmp_path)
    assert not wait_gone(pids, 30)


def test_apply_needs_its_run_as_its_help_says(tmp_path: Path) -> None:
    shown = topo("apply", "--help", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "RUN" in text and "FILE" in text and "--reset-params" in text and "--yes" in text
    assert "default: the latest run" not in text
    file = tmp_path / "tickers.yaml"
    file.write_text(TICKERS)
    alone = topo("apply", str(file), cwd=tmp_path)
    assert alone.returncode == 2 and "Missing argument 'FILE'" in alone.stderr, alone.stderr
