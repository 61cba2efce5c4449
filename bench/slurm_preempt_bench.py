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

* **paired**: the uninterrupted run, preempted: ``topo run --resume RUN --snapshot K``
  submitted from its newest snapshot K before 40 % (what a preemption there does: a
  snapshot, then the job again from it), preempted once more at 70 %, until 475. The
  two share their history up to K, so only what the interruptions cost differs; two
  separate runs of one seed diverge from their first steps (DQN's steps to 475 spread
  2-3x between runs), which the unpaired ratio keeps.

Compared: the actor steps executed to reach 475. A preempted run executed the steps of
its last life up to 475 (its counter goes on from each snapshot) plus, for each
preemption, what its actors ran after the snapshot and before they stopped (the counter
the evaluator last saw in that life, less the snapshot's), against the uninterrupted
run's; goal: at most 1.2x, as medians over seeds. Every run snapshots on the same clock
(``--every-s``; kept, for the paired run): only the preemptions differ.

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

from bench.dqn_curve import Curve, curve_of, reached, snapshot_steps  # noqa: E402
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


def submit(slurm: SlurmCluster, work: Path, *args: str) -> tuple[str, Path]:
    """``topo run ARGS -b slurm -d --partition graced`` from the login node."""
    done = login_topo(slurm, work, "run", *args, "-b", "slurm", "-d", "--partition", "graced")
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


def preempted_run(
    slurm: SlurmCluster,
    work: Path,
    args: list[str],
    goal: int,
    at: list[float],
    cap_s: float,
    earlier: tuple[Path, int] | None = None,
) -> dict[str, Any]:
    """Submit ``topo run ARGS``, preempt it at each of ``at`` times ``goal`` actor steps,
    follow it to 475: the steps it executed to get there (None: it did not), its
    preemptions, lives and evaluations. ``earlier``: (a run directory, its lives) -- a
    run resumed there goes on in it, after those lives."""
    t0 = time.monotonic()
    job, run_dir = submit(slurm, work, *args)
    out = run_dir / f"slurm-{job}.out"
    preemptions: list[dict[str, Any]] = []
    for i, fraction in enumerate(at):
        steps = int(goal * fraction)

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
                            "snapshot_steps": snapshot_steps(run_dir)[number]})  # fmt: skip
    curve = follow(slurm, job, run_dir, lambda c: reached(c) is not None, cap_s)
    wall = time.monotonic() - t0
    stop(slurm, work, job, run_dir)
    lives = sorted({e["life"] for e in curve})
    first = earlier[1] if earlier is not None and earlier[0] == run_dir else 0
    executed, before = score(curve, preemptions, first)
    return {"steps": executed, "preemptions": preemptions, "lives": len(lives) - first,
            "wall_s": round(wall, 1), "curve": curve, "before_goal": before}  # fmt: skip


def score(curve: Curve, preemptions: list[dict[str, Any]], first: int) -> tuple[int | None, int]:
    """(the actor steps executed to 475, how many of the preemptions came before it):
    the counter at the first evaluation at 475, plus what the actors ran after the
    snapshot of each preemption before that evaluation's life (life ``first + k`` ends
    with preemption k). A run may reach 475 before a preemption point: the preemptions
    after it then cost nothing."""
    for k, p in enumerate(preemptions):
        seen = [e["actor_steps"] for e in curve if e["life"] == first + k]
        p["last_seen_steps"] = max(seen, default=p["snapshot_steps"])
        p["lost_steps"] = max(0, p["last_seen_steps"] - p["snapshot_steps"])
    last = reached(curve)
    if last is None:
        return None, 0
    before = [p for k, p in enumerate(preemptions) if first + k < last["life"]]
    return int(last["actor_steps"] + sum(p["lost_steps"] for p in before)), len(before)


def one_seed(
    slurm: SlurmCluster, seed: int, at: list[float], every_s: float, cap_s: float
) -> dict[str, Any]:
    params = [
        "-p", f"seed={seed}", "-p", "max_actor_steps=null", "-p", "eval_episodes=20",
        "-p", "eval_every_s=5.0", "-p", "num_actors=2", "-p", f"checkpoint_every_s={every_s}",
    ]  # fmt: skip
    work = Path(tempfile.mkdtemp(prefix=f"slurm-preempt-{seed}-"))
    topology = work / "acme_keep_all.yaml"  # the example, keeping every snapshot
    topology.write_text(f"extends: {TOPOLOGY}\nsnapshots: {{keep: 1000}}\n")
    try:
        t0 = time.monotonic()
        job, base_dir = submit(slurm, work, str(topology), *params)
        base = follow(slurm, job, base_dir, lambda c: reached(c) is not None, cap_s)
        base_s = time.monotonic() - t0
        stop(slurm, work, job, base_dir)
        goal = reached(base)
        if goal is None:
            return {"seed": seed, "error": "the uninterrupted run did not reach 475"}
        g = int(goal["actor_steps"])
        unpaired = preempted_run(slurm, work, [str(topology), *params], g, at, cap_s)
        out: dict[str, Any] = {
            "seed": seed,
            "base_steps_to_goal": g,
            "preempted_steps_to_goal": unpaired["steps"],
            "ratio": None if unpaired["steps"] is None else round(unpaired["steps"] / g, 3),
            "preemptions": unpaired["preemptions"],
            "before_goal": unpaired["before_goal"],
            "lives": unpaired["lives"],
            "base_s": round(base_s, 1),
            "preempted_s": unpaired["wall_s"],
            "base": base,
            "preempted": unpaired["curve"],
        }
        # paired: the uninterrupted run from its newest snapshot before the first
        # preemption point, preempted at the others
        kept = list(snapshot_steps(base_dir).items())
        before = [(n, st) for n, st in kept if st <= g * at[0]]
        if before:
            number, from_steps = before[-1]
            args = ["--resume", str(base_dir), "--snapshot", str(number)]
            base_lives = len({e["life"] for e in base})
            paired = preempted_run(slurm, work, args, g, at[1:], cap_s, (base_dir, base_lives))
            out.update(
                paired_snapshot_steps=from_steps,
                paired_steps_to_goal=paired["steps"],
                paired_ratio=None if paired["steps"] is None else round(paired["steps"] / g, 3),
                paired_preemptions=paired["preemptions"],
                paired_before_goal=paired["before_goal"],
                paired_s=paired["wall_s"],
                paired_curve=paired["curve"],
            )
        return out
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
        "paired_ratios": [r["paired_ratio"] for r in results if r.get("paired_ratio")],
    }


def markdown(report: dict[str, Any]) -> str:
    rows = [
        "| seed | uninterrupted: steps to 475 | preempted at (snapshot's steps, lost) | "
        "preemptions before 475 | preempted: steps to 475 | ratio | lives | wall time "
        "(uninterrupted / preempted) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        if "error" in r:
            rows.append(f"| {r['seed']} | {r['error']} |||||||")
            continue
        at = "; ".join(
            f"{p['at_steps']} ({p['snapshot_steps']}, {p['lost_steps']})" for p in r["preemptions"]
        )
        rows.append(
            f"| {r['seed']} | {r['base_steps_to_goal']} | {at} | "
            f"{r.get('before_goal', '?')} of {len(r['preemptions'])} | "
            f"{r['preempted_steps_to_goal']} | {r['ratio']} | {r['lives']} | "
            f"{r['base_s']} s / {r['preempted_s']} s |"
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
    paired = [r for r in report["results"] if r.get("paired_ratio") is not None]
    if paired:
        ratios = [r["paired_ratio"] for r in paired]
        text += (
            f"\n\n**Paired** (the uninterrupted run resumed from its newest snapshot before "
            f"{report['at'][0]:.0%} -- a preemption there -- and preempted again at the "
            f"others: the two share their history up to that snapshot): median ratio "
            f"**{statistics.median(ratios):.2f}×** over {len(ratios)} seeds "
            f"({', '.join(f'{x:.2f}' for x in ratios)})."
        )
        rows += [
            "",
            "| seed | uninterrupted: steps to 475 | resumed from its snapshot at | "
            "preempted at (snapshot's steps, lost) | paired: steps to 475 | ratio | wall |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in paired:
            at = "; ".join(
                f"{p['at_steps']} ({p['snapshot_steps']}, {p['lost_steps']})"
                for p in r["paired_preemptions"]
            )
            rows.append(
                f"| {r['seed']} | {r['base_steps_to_goal']} | {r['paired_snapshot_steps']} | "
                f"{at} | {r['paired_steps_to_goal']} | {r['paired_ratio']} | {r['paired_s']} s |"
            )
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
    parser.add_argument("--every-s", type=float, default=5.0, help="snapshot clock (s)")
    parser.add_argument("--cap-s", type=float, default=900.0)
    parser.add_argument("--out", default="slurm-preempt")
    parser.add_argument("--rescore", action="store_true", help="score <out>.json again")
    parser.add_argument(
        "--add", action="store_true", help="add these seeds' results to <out>.json's"
    )
    args = parser.parse_args()
    if args.rescore:
        report = json.loads((RESULTS / f"{args.out}.json").read_text())
        for r in report["results"]:
            if "preempted" in r:
                r["preempted_steps_to_goal"], r["before_goal"] = score(
                    r["preempted"], r["preemptions"], 0
                )
                steps = r["preempted_steps_to_goal"]
                r["ratio"] = None if steps is None else round(steps / r["base_steps_to_goal"], 3)
        report["summary"] = summary(report["results"])
        (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=1))
        (RESULTS / f"{args.out}.md").write_text(markdown(report))
        print(markdown(report))
        return
    why = cluster.unavailable()
    if why is not None:
        raise SystemExit(f"no Slurm test cluster here: {why}")
    os.chdir(ROOT)
    root = Path(tempfile.mkdtemp(prefix="topo-slurm-pb-"))  # (short: munge's socket path)
    slurm = cluster.start(root)
    try:
        results = []
        for seed in args.seeds:
            results.append(one_seed(slurm, seed, args.at, args.every_s, args.cap_s))
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
    command = " ".join([".venv/bin/python", "bench/slurm_preempt_bench.py", *sys.argv[1:]])
    if args.add:  # the earlier seeds' results, and the commands that made them
        earlier = json.loads((RESULTS / f"{args.out}.json").read_text())
        ran = {r["seed"] for r in results}
        results = [r for r in earlier["results"] if r["seed"] not in ran] + results
        results.sort(key=lambda r: r["seed"])
        command = f"{earlier['command'].strip('`')}`, then `{command}"
    report = {
        "command": f"`{command}`",
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
