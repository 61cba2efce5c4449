"""Distributed DQN on Slurm, preempted twice, reaches 475 for about the actor steps of an
uninterrupted run (issue 43).

Each seed runs ``acme_distributed.yaml`` submitted from the login node with ``topo run
-b slurm -d`` to the ``graced`` partition of the tests' Slurm cluster (its preemption
grace time lets the run snapshot *at* the preemption), twice:

* **uninterrupted**: until the evaluator's mean return first reaches 475;
* **preempted**: the same; at ``--at`` (40 % and 70 %) of the uninterrupted run's actor
  steps to 475 an ``urgent`` job takes the run's nodes: Slurm preempts the job, the run
  snapshots, stops and asks for its job again, and the requeued job resumes from that
  snapshot by itself -- until 475.

Compared: the actor steps executed to reach 475. A preempted run executed the steps of
its last life up to 475 (its counter goes on from each snapshot) plus, for each
preemption, what its actors ran after the snapshot and before they stopped (the counter
the evaluator last saw in that life, less the snapshot's), against the uninterrupted
run's; goal: at most 1.2x, as medians over seeds (one seed's two runs diverge from their
first steps: DQN's steps to 475 spread 2-3x between runs).

Needs root and Debian's slurm-wlm and munge (the tests' cluster,
``tests/backends/slurm/cluster.py``: two nodes on this machine). Run from the
repository root: ``.venv/bin/python bench/slurm_preempt_bench.py --seeds 0 1 2 3 4``.
Writes bench/results/<out>.json and <out>.md.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.resume_bench import EVAL, reached  # noqa: E402
from tests.backends.slurm import cluster  # noqa: E402
from tests.backends.slurm.cluster import SlurmCluster  # noqa: E402
from tests.backends.slurm.requeue_support import (  # noqa: E402
    hurried,
    login_topo,
    node_taken,
    state_of,
    take_node,
)

RESULTS = ROOT / "bench" / "results"
TOPOLOGY = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
RESUMED = re.compile(r"resumed from snapshot (\d+) after preemption")
Curve = list[dict[str, float]]


def curve_of(run_dir: Path) -> Curve:
    """The evaluator's evaluations so far, each with its life (a life's clock starts at
    0: a drop of the evaluator's elapsed seconds is a requeued job's new life)."""
    path = run_dir / "logs" / "evaluator_0.log"
    text = path.read_text(errors="replace") if path.is_file() else ""
    curve: Curve = []
    life, last = 0, -1.0
    for m in EVAL.findall(text):
        elapsed = float(m[0])
        if elapsed < last:
            life += 1
        last = elapsed
        curve.append({"life": life, "actor_steps": int(m[1]), "mean_return": float(m[4])})
    return curve


def follow(
    slurm: SlurmCluster, job: str, run_dir: Path, done: Callable[[Curve], bool], cap_s: float
) -> Curve:
    """Follow the evaluator until ``done(curve)`` or ``cap_s`` seconds; a requeued job is
    made eligible meanwhile (the test cluster holds it for its begin time)."""
    end = time.monotonic() + cap_s
    curve = curve_of(run_dir)
    while time.monotonic() < end and not done(curve):
        time.sleep(1.0)
        hurried(slurm, job)
        curve = curve_of(run_dir)
    return curve


def submit(slurm: SlurmCluster, work: Path, params: list[str]) -> tuple[str, Path]:
    done = login_topo(
        slurm, work, "run", str(TOPOLOGY), "-b", "slurm", "-d", "--partition", "graced", *params
    )
    if done.returncode != 0:
        raise RuntimeError(f"topo run failed:\n{done.stdout}{done.stderr}")
    job, run_dir = done.stdout.split()
    return job, Path(run_dir)


def stop(slurm: SlurmCluster, work: Path, job: str, run_dir: Path) -> None:
    """``topo stop`` the run, and wait for its job to leave the queue."""
    login_topo(slurm, work, "stop", str(run_dir))
    end = time.monotonic() + 300
    while time.monotonic() < end and slurm.job_state(job) not in ("COMPLETED", "CANCELLED", ""):
        time.sleep(1.0)


def snapshot_steps(run_dir: Path, number: int) -> int:
    manifest = json.loads((run_dir / "snapshots" / str(number) / "manifest.json").read_text())
    return int(manifest["counts"]["counter"]["actor_steps"])


def one_seed(slurm: SlurmCluster, seed: int, at: list[float], cap_s: float) -> dict[str, Any]:
    params = [
        "-p", f"seed={seed}", "-p", "max_actor_steps=null", "-p", "eval_episodes=20",
        "-p", "eval_every_s=5.0", "-p", "num_actors=2",
    ]  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix=f"slurm-preempt-{seed}-"))
    try:
        t0 = time.monotonic()
        job, run_dir = submit(slurm, work, params)
        base = follow(slurm, job, run_dir, lambda c: reached(c) is not None, cap_s)
        base_s = time.monotonic() - t0
        stop(slurm, work, job, run_dir)
        goal = reached(base)
        if goal is None:
            return {"seed": seed, "error": "the uninterrupted run did not reach 475"}
        t0 = time.monotonic()
        job, run_dir = submit(slurm, work, params)
        out = run_dir / f"slurm-{job}.out"
        preemptions: list[dict[str, Any]] = []
        for i, fraction in enumerate(at):
            steps = int(goal["actor_steps"] * fraction)

            def past(c: Curve, s: int = steps) -> bool:
                return bool(c) and c[-1]["actor_steps"] >= s

            follow(slurm, job, run_dir, past, cap_s)
            urgent = take_node(slurm, state_of(slurm, job)["NodeList"])
            node_taken(slurm, urgent)

            def resumed(_: Curve, n: int = i + 1) -> bool:
                return len(RESUMED.findall(out.read_text(errors="replace"))) >= n

            follow(slurm, job, run_dir, resumed, cap_s)
            number = int(RESUMED.findall(out.read_text(errors="replace"))[i])
            preemptions.append({"at_steps": steps, "snapshot": number,
                                "snapshot_steps": snapshot_steps(run_dir, number)})  # fmt: skip
        curve = follow(slurm, job, run_dir, lambda c: reached(c) is not None, cap_s)
        preempted_s = time.monotonic() - t0
        stop(slurm, work, job, run_dir)
        last = reached(curve)
        for p, life in zip(preemptions, range(len(preemptions)), strict=True):
            seen = [e["actor_steps"] for e in curve if e["life"] == life]
            p["last_seen_steps"] = max(seen, default=p["snapshot_steps"])
            p["lost_steps"] = max(0, p["last_seen_steps"] - p["snapshot_steps"])
        executed = None
        if last is not None and last["life"] == len(preemptions):
            executed = last["actor_steps"] + sum(p["lost_steps"] for p in preemptions)
        return {
            "seed": seed,
            "base_steps_to_goal": goal["actor_steps"],
            "preempted_steps_to_goal": executed,
            "ratio": None if executed is None else round(executed / goal["actor_steps"], 3),
            "preemptions": preemptions,
            "lives": 1 + max((e["life"] for e in curve), default=0),
            "base_s": round(base_s, 1),
            "preempted_s": round(preempted_s, 1),
            "base": base,
            "preempted": curve,
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    ok = [r for r in results if r.get("preempted_steps_to_goal") is not None]
    if not ok:
        return {}
    base = statistics.median(r["base_steps_to_goal"] for r in ok)
    preempted = statistics.median(r["preempted_steps_to_goal"] for r in ok)
    return {
        "seeds": len(ok),
        "median_base_steps": base,
        "median_preempted_steps": preempted,
        "ratio_of_medians": preempted / base,
        "median_ratio": statistics.median(r["ratio"] for r in ok),
        "median_lost_steps": statistics.median(
            p["lost_steps"] for r in ok for p in r["preemptions"]
        ),
    }


def markdown(report: dict[str, Any]) -> str:
    rows = [
        "| seed | uninterrupted: steps to 475 | preempted at (snapshot's steps, lost) | "
        "preempted: steps to 475 | ratio | lives | wall time (uninterrupted / preempted) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        if "error" in r:
            rows.append(f"| {r['seed']} | {r['error']} ||||||")
            continue
        at = "; ".join(
            f"{p['at_steps']} ({p['snapshot_steps']}, {p['lost_steps']})" for p in r["preemptions"]
        )
        rows.append(
            f"| {r['seed']} | {r['base_steps_to_goal']} | {at} | {r['preempted_steps_to_goal']} | "
            f"{r['ratio']} | {r['lives']} | {r['base_s']} s / {r['preempted_s']} s |"
        )
    s = report["summary"]
    if s:
        text = (
            f"Over {s['seeds']} seeds: median actor steps to 475 **{s['median_base_steps']:.0f}** "
            f"uninterrupted and **{s['median_preempted_steps']:.0f}** preempted twice, a ratio "
            f"of medians of **{s['ratio_of_medians']:.2f}×** (goal ≤ 1.2×; median of the "
            f"per-seed ratios {s['median_ratio']:.2f}×). Steps the actors ran after the "
            f"snapshot at a preemption (lost): median {s['median_lost_steps']:.0f}."
        )
    else:
        text = "No seed reached 475 preempted."
    return (
        "# DQN on Slurm, preempted twice (bench/slurm_preempt_bench.py)\n\n"
        f"{report['command']}\n\n"
        f"`acme_distributed.yaml` (2 actors, evaluations of 20 episodes every 5 s) submitted "
        f"to the tests' Slurm cluster (2 nodes on this machine, partition `graced`: a "
        f"preemption grace of {cluster.GRACE_S} s); preempted by an `urgent` job at "
        f"{', '.join(f'{a:.0%}' for a in report['at'])} of the uninterrupted run's actor "
        f"steps to 475. {report['when']}, load average at the end: "
        f"{', '.join(f'{x:.1f}' for x in report['load'])}.\n\n{text}\n\n" + "\n".join(rows) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    parser.add_argument("--at", type=float, nargs="+", default=[0.4, 0.7])
    parser.add_argument("--cap-s", type=float, default=900.0)
    parser.add_argument("--out", default="slurm-preempt")
    args = parser.parse_args()
    why = cluster.unavailable()
    if why is not None:
        raise SystemExit(f"no Slurm test cluster here: {why}")
    os.chdir(ROOT)
    root = Path(tempfile.mkdtemp(prefix="topo-slurm-pb-"))  # (short: munge's socket path)
    slurm = cluster.start(root)
    try:
        results = []
        for seed in args.seeds:
            results.append(one_seed(slurm, seed, args.at, args.cap_s))
            print(
                json.dumps(
                    {k: v for k, v in results[-1].items() if k not in ("base", "preempted")}
                ),
                flush=True,
            )
    finally:
        left = slurm.stop()
        shutil.rmtree(root, ignore_errors=True)
        if left:
            print(f"the test cluster left processes: {left}", file=sys.stderr)
    report = {
        "command": "`"
        + " ".join([".venv/bin/python", "bench/slurm_preempt_bench.py", *sys.argv[1:]])
        + "`",
        "at": args.at,
        "when": time.strftime("%Y-%m-%d %H:%M"),
        "load": os.getloadavg(),
        "results": results,
        "summary": summary(results),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=1))
    (RESULTS / f"{args.out}.md").write_text(markdown(report))
    print(markdown(report))


if __name__ == "__main__":
    main()
