"""A clean run of ``./dev run``'s topology (acme_distributed on procs) stops cleanly: every
node ends within the grace period, the console shows no Reverb error (no writer ends
with items in flight) and none of Reverb's benign INFO lines, which stay in the replay's
log file."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from topo.testing import wait_gone

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)

ROOT = Path(__file__).resolve().parents[2]
TINY = {"num_actors": 2, "max_actor_steps": 3000, "min_replay_size": 300, "eval_every_s": 5}


@pytest.mark.slow
def test_a_clean_run_shows_no_reverb_error_and_every_node_stops_in_the_grace(
    tmp_path: Path,
) -> None:
    argv = [sys.executable, "-m", "topo", "run", "examples/topologies/acme_distributed.yaml"]
    argv += ["-b", "procs", "--no-live", "--log-dir", str(tmp_path / "runs")]
    for key, value in TINY.items():
        argv += ["-p", f"{key}={value}"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300)
    console = done.stdout + done.stderr
    [run_dir] = (tmp_path / "runs").glob("acme_distributed-*")
    status = json.loads((run_dir / "status.json").read_text())
    assert not wait_gone([n["pid"] for n in status["nodes"] if n["pid"]], 15)
    assert done.returncode == 0, console[-3000:]
    assert "final evaluation return:" in console
    assert "Error" not in console and "DATA_LOSS" not in console, console[-3000:]
    assert "grace period" not in console and not status["warnings"], status["warnings"]
    assert {n["id"]: n["state"] for n in status["nodes"]} == dict.fromkeys(
        [n["id"] for n in status["nodes"]], "finished"
    )
    logs = run_dir / "logs"
    assert "learner: stopped after" in (logs / "learner.log").read_text()
    # Reverb's INFO lines are in the replay's log, not on the console.
    assert "Shutting down replay server" in (logs / "replay.log").read_text()
    assert "Shutting down replay server" not in console
    assert "Sampler and server are owned by the same process" not in console
