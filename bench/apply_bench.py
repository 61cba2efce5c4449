"""``topo apply`` measured (issue 30): time to 16 new actors ready, failed calls during
changes, and the plan of a 1,000-node program.

* **Scale up** (goal ≤ 1 s): a program of a ``caller`` looping over ``"@worker"`` and 4
  courier workers on procs gets 16 workers more; timed from the call of
  ``RunningProgram.apply`` to the change's record saying *applied* (the new workers are
  ready and the caller's handle holds them), and, for the launcher alone, the record's
  own time of its start step. Baseline in the same run: ``topo.launch`` of a program of
  16 such workers, to every node ready. Also ``topo apply`` as a command (start-up,
  compile and the control socket included).
* **Failed calls** (goal 0): during every change of the rounds (16 up, a rolling restart
  of all 20 workers, 16 down) the caller counts its calls and every error.
* **Plan** (goal ≤ 0.2 s): ``plan_change`` (the live packing, the diff, the actions) of
  ``acme_distributed.yaml`` compiled to 1,000 nodes against the same with one actor more.
* **DQN** (``--dqn``): ``acme_distributed.yaml`` training on procs (no step budget, actors
  never held back by the rate limiter) goes from 2 actors to 8 and back to 2; the
  actors' rate (``actor_steps`` per second over 15 s) in each phase, how long each
  change took, and whether the learner kept its process.

``.venv/bin/python bench/apply_bench.py [--rounds 5] [--dqn]``; medians over the rounds.
Writes ``bench/results/apply.md`` and ``apply.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NODES = ROOT / "tests" / "apply"  # apply_nodes: Worker, Caller
sys.path[:0] = [str(ROOT), str(NODES)]
os.environ["PYTHONPATH"] = os.pathsep.join([str(NODES), os.environ.get("PYTHONPATH", "")])

import topo  # noqa: E402
from topo.api import load  # noqa: E402
from topo.supervisor.change_plan import plan_change  # noqa: E402

RESULTS = ROOT / "bench" / "results"
EXAMPLE = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
ADDED = 16
BASE_WORKERS = 4


def topology(where: Path, workers: int, tag: str = "v1", caller: bool = True) -> Path:
    path = where / f"w{workers}-{tag}-{int(caller)}.yaml"
    boss = 'caller: {target: apply_nodes:Caller, args: {workers: "@worker"}}' if caller else ""
    path.write_text(
        textwrap.dedent(f"""
        name: apply_bench
        nodes:
          worker:
            target: apply_nodes:Worker
            count: {workers}
            args: {{worker_id: "${{replica}}", tag: {tag}}}
          {boss}
        """)
    )
    return path


def one_round(where: Path) -> dict[str, Any]:
    """Launch baseline, then up / rolling / down on one run; times and the caller's errors."""
    t0 = time.perf_counter()
    base = topo.launch(topology(where, ADDED, caller=False), backend="procs", log_dir=where)
    assert base.wait_ready(120)
    launch_s = time.perf_counter() - t0
    base.stop(timeout=60)

    run = topo.launch(topology(where, BASE_WORKERS), backend="procs", log_dir=where)
    try:
        assert run.wait_ready(120)
        caller = run.handle("caller")
        t0 = time.perf_counter()
        up = run.apply(topology(where, BASE_WORKERS + ADDED))
        up_s = time.perf_counter() - t0
        assert up.result == "applied" and up.record is not None, up.record
        started = next(s["at_s"] for s in up.record["steps"] if s["step"] == "start")
        assert len(caller.stats()["members"]) == BASE_WORKERS + ADDED
        t0 = time.perf_counter()
        rolled = run.apply(topology(where, BASE_WORKERS + ADDED, tag="v2"), max_unavailable=4)
        rolling_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        down = run.apply(topology(where, BASE_WORKERS, tag="v2"))
        down_s = time.perf_counter() - t0
        assert rolled.result == down.result == "applied"
        cli_s = _cli_apply(run, topology(where, BASE_WORKERS + ADDED, tag="v2"))
        stats = caller.stats()
    finally:
        run.stop(timeout=60)
    return {
        "launch_16_s": launch_s,
        "apply_up_s": up_s,
        "launcher_start_step_s": started,
        "cli_apply_up_s": cli_s,
        "rolling_20_s": rolling_s,
        "apply_down_s": down_s,
        "calls": stats["calls"],
        "failed_calls": len(stats["errors"]),
        "errors": stats["errors"][:5],
    }


def _cli_apply(run: Any, path: Path) -> float:
    """``topo apply RUN FILE`` as a user types it: start-up, compile, socket, the change."""
    t0 = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "topo", "apply", str(run.run_dir), str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    took = time.perf_counter() - t0
    assert done.returncode == 0, done.stdout + done.stderr
    return took


def plan_1000(runs: int = 7) -> tuple[int, float]:
    """Nodes of the big program, and the median time of its live plan (+1 actor)."""
    fixed = ["num_learners=4", "num_actors_per_node=2"]
    probe = load(EXAMPLE, [*fixed, "num_actors=1"]).program
    actors = 1000 - (len(probe.nodes) - 1)
    old = load(EXAMPLE, [*fixed, f"num_actors={actors}"]).program
    new = load(EXAMPLE, [*fixed, f"num_actors={actors + 1}"]).program
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        plan_change(old, new)
        times.append(time.perf_counter() - t0)
    return len(old.nodes), statistics.median(times)


def dqn(where: Path) -> dict[str, Any]:
    """The DQN example from 2 actors to 8 and back while it trains: rates and times."""
    base = {"max_actor_steps": None, "samples_per_insert": None, "min_replay_size": 500}
    run = topo.launch(EXAMPLE, backend="procs", params={**base, "num_actors": 2}, log_dir=where)
    try:
        assert run.wait_ready(300)
        counter = run.handle("counter", timeout=30)
        learner_pid = run.launcher.state.nodes["learner"].pid

        def rate(seconds: float = 15.0) -> float:
            before, t0 = counter.get_counts().get("actor_steps", 0), time.monotonic()
            time.sleep(seconds)
            return (counter.get_counts().get("actor_steps", 0) - before) / (time.monotonic() - t0)

        time.sleep(10)
        out: dict[str, Any] = {"rate_2": rate()}
        for n, key in ((8, "8"), (2, "2_again")):
            t0 = time.perf_counter()
            change = run.apply(EXAMPLE, {**base, "num_actors": n}, timeout=300)
            out[f"apply_to_{key}_s"] = time.perf_counter() - t0
            assert change.result == "applied", change.record
            time.sleep(5)
            out[f"rate_{key}"] = rate()
        out["learner_kept"] = run.launcher.state.nodes["learner"].pid == learner_pid
        out["learner_restarts"] = run.launcher.state.nodes["learner"].restarts
    finally:
        run.stop(timeout=60)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--dqn", action="store_true", help="also the DQN example, 2 → 8 → 2")
    args = parser.parse_args()
    rounds = []
    with tempfile.TemporaryDirectory(prefix="apply-bench-") as tmp:
        for i in range(args.rounds):
            where = Path(tmp) / str(i)
            where.mkdir()
            rounds.append(one_round(where))
            print(f"round {i + 1}: {json.dumps(rounds[-1])}", flush=True)
    nodes, plan_s = plan_1000()
    trained: dict[str, Any] | None = None
    if args.dqn:
        with tempfile.TemporaryDirectory(prefix="apply-bench-dqn-") as tmp:
            trained = dqn(Path(tmp))
            print(f"dqn: {json.dumps(trained)}", flush=True)
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0] if k != "errors"}
    failed = sum(r["failed_calls"] for r in rounds)
    calls = sum(r["calls"] for r in rounds)
    load_avg = os.getloadavg()[0]
    lines = [
        "# topo apply (issue 30)",
        "",
        f"`.venv/bin/python bench/apply_bench.py --rounds {args.rounds}` on "
        f"{platform.machine()}, {os.cpu_count()} CPUs, load {load_avg:.1f} at the end; "
        "medians over the rounds. Nodes: courier workers (`tests/apply/apply_nodes.py`) on "
        "procs, a caller looping over a handle to the whole group.",
        "",
        "| measure | median | goal |",
        "| --- | ---: | ---: |",
        f"| `run.apply()`: {ADDED} workers added to {BASE_WORKERS}, applied (ready, in the "
        f"caller's handle) | {med['apply_up_s']:.3f} s | ≤ 1 s |",
        f"| the launcher's own start step of that change | {med['launcher_start_step_s']:.3f} s "
        "| |",
        f"| baseline: `topo.launch` of {ADDED} workers, all ready | {med['launch_16_s']:.3f} s | |",
        f"| ratio apply / launch | {med['apply_up_s'] / med['launch_16_s']:.2f}× | |",
        f"| `topo apply RUN FILE` command, +{ADDED} (start-up and compile included) "
        f"| {med['cli_apply_up_s']:.3f} s | |",
        f"| rolling restart of 20 workers, 4 at a time | {med['rolling_20_s']:.3f} s | |",
        f"| {ADDED} workers removed | {med['apply_down_s']:.3f} s | |",
        f"| failed calls during all changes | {failed} of {calls:,} | 0 |",
        f"| live plan of a {nodes:,}-node program, +1 actor | {plan_s * 1000:.1f} ms | ≤ 200 ms |",
        "",
    ]
    if trained is not None:
        lines += [
            "DQN (`acme_distributed.yaml` on procs, training, no rate limiter), one run:",
            "",
            "| phase | actors' rate (steps/s) | change took |",
            "| --- | ---: | ---: |",
            f"| 2 actors | {trained['rate_2']:,.0f} | |",
            f"| 8 actors | {trained['rate_8']:,.0f} | {trained['apply_to_8_s']:.1f} s |",
            f"| 2 actors again | {trained['rate_2_again']:,.0f} | "
            f"{trained['apply_to_2_again_s']:.1f} s |",
            "",
            f"The learner kept its process: {trained['learner_kept']} "
            f"(restarts: {trained['learner_restarts']}).",
            "",
        ]
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "apply.md").write_text("\n".join(lines))
    (RESULTS / "apply.json").write_text(
        json.dumps(
            {"rounds": rounds, "medians": med, "plan_1000_s": plan_s, "dqn": trained}, indent=2
        )
    )
    print("\n".join(lines))


if __name__ == "__main__":
    main()
