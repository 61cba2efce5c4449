"""The DQN examples as running programs: acme_distributed learns CartPole on procs and
on threads, acme_colocated on procs, and they stop by themselves; the replay's tables
factory gets the group's args."""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

# No import of the agent here: the nodes import it (see test_dqn_learner.py on why).
pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("reverb", "haiku", "jax")),
    reason="needs the rl and reverb extras",
)

ROOT = Path(__file__).resolve().parents[2]

from tests.agents.learning import SMALL, assert_learned  # noqa: E402
from topo.testing import wait_gone  # noqa: E402

EXAMPLES = ROOT / "examples" / "topologies"
CASES = [
    # procs: two learners (a secondary serving half the actors), actors two per process,
    # a model saver; threads: the defaults' layout with fewer actors.
    ("acme_distributed", "procs", {"num_learners": 2, "num_actors_per_node": 2, "snapshots": True}),
    # On threads, actors held back by the rate limiter at the stop are released by the
    # reverb node before its server closes (a client blocked in Reverb then can abort).
    ("acme_distributed", "threads", {"num_actors": 2}),
    # acme_colocated learns on procs; on threads it runs and stops by itself in the seed
    # programs' tests (tests/export/test_seed_programs.py, test_mt), and DQN learns on
    # threads in the distributed case above: a learning run of it there added no check.
    ("acme_colocated", "procs", {"snapshots": True}),
]


def run_on_threads(path: Path, params: dict, tmp_path: Path) -> dict[str, str]:
    """``topo run -b threads`` in a child process (the whole program, TensorFlow and JAX
    included, as threads of that process: a crash there fails this test, not the test
    session); the node logs by node id."""
    argv = [sys.executable, "-m", "topo", "run", str(path), "-b", "threads", "--no-live"]
    argv += ["--log-dir", str(tmp_path / "runs")]
    for key, value in params.items():
        argv += ["-p", f"{key}={'null' if value is None else value}"]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [logs] = (tmp_path / "runs").glob("*-*/logs")
    return {re.sub(r"_(\d+)$", r"/\1", f.stem): f.read_text() for f in logs.glob("*.log")}


@pytest.mark.slow
@pytest.mark.parametrize(("example", "backend", "extra"), CASES, ids=lambda c: str(c))
def test_the_dqn_example_learns_and_stops_by_itself(
    topo_launch: Callable, tmp_path: Path, example: str, backend: str, extra: dict
) -> None:
    params = {**SMALL, **extra, "snapshot_dir": str(tmp_path / "snapshots"), "snapshot_every_s": 3}
    path = EXAMPLES / f"{example}.yaml"
    if backend == "threads":
        logs = run_on_threads(path, params, tmp_path)
    else:
        run = topo_launch(path, backend, params=params)
        assert run.wait(240) == 0, run.failure
        assert not wait_gone(run.pids(), 15)
        logs = {n.id: run.log(n.id) for n in run.program.nodes}
        # Every node stopped within the grace: none was killed (with its stacks dumped).
        status = json.loads((run.run_dir / "status.json").read_text())
        assert not [w for w in status["warnings"] if "grace period" in w], status["warnings"]
    returns = assert_learned(logs["evaluator/0"])
    print(f"{example} on {backend}: evaluations {returns}; {logs['learner'].splitlines()[-1:]}")
    assert "learner: stopped after" in logs["learner"]
    if extra.get("snapshots"):
        assert sorted((tmp_path / "snapshots").glob("params_*.npz"))
    if extra.get("num_learners", 1) > 1:
        assert "learner: stopped" in logs["secondary_learner/0"]


@pytest.mark.slow
def test_the_replay_tables_factory_gets_the_group_args(
    topo_launch: Callable, tmp_path: Path
) -> None:
    import reverb

    path = tmp_path / "replay.yaml"
    path.write_text(
        textwrap.dedent("""
        name: replay_args
        nodes:
          replay:
            kind: reverb
            tables: examples.agents.dqn:make_replay_tables
            args: {prioritized: false, max_size: 321, min_size_to_sample: 7,
                   samples_per_insert: 4.0}
        """)
    )
    run = topo_launch(path, "threads", ready_timeout=120)
    [info] = reverb.Client(run.handle("replay").address()).server_info().values()
    assert info.max_size == 321
    assert info.sampler_options.HasField("uniform")
    assert info.rate_limiter_info.min_size_to_sample == 7
    assert info.rate_limiter_info.samples_per_insert == 4.0
    assert run.stop(timeout=60) == 0
