"""A crash in the middle of training costs minutes, not the run (issue 29).

Distributed DQN on CartPole (``acme_distributed.yaml`` on procs), each seed twice:

* **uninterrupted**: ``topo run -d`` with program snapshots every ``--every-s`` seconds,
  until the evaluator's mean return first reaches 475;
* **crashed**: the same; at about
  ``--crash-at`` (60 %) of the uninterrupted run's actor steps to 475 the launcher is
  killed with SIGKILL (its nodes end with it), then ``topo run --resume RUN_DIR`` brings
  the program back from its newest snapshot and runs until 475.

* **paired**: the uninterrupted run keeps all its snapshots; ``topo run --resume RUN
  --snapshot K`` from its newest snapshot before 60 % runs until 475, and the crash is
  taken as the worst case, just before its next snapshot (all steps since snapshot K
  lost). With and without the crash then share their history up to snapshot K: one seed's
  two separate runs diverge from the first steps (DQN's steps to 475 spread 2-3x between
  runs), which the paired ratio leaves out.

Reported: the last evaluation before the kill and the first after the resume (the
resumed policy must not fall back to random: within 10 %), the actor steps executed to
reach 475 with the crash (steps before the kill + steps after the resume) against the
uninterrupted run's (goal ≤ 1.2×, compared as medians over seeds: one seed's two runs
diverge from the first steps, so a single pair says little), the snapshot's pause and
size. Writes
bench/results/<out>.json, <out>.md and <out>.png (both learning curves against actor
steps executed). ``.venv/bin/python bench/resume_bench.py --seeds 0 1``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.dqn_curve import GOAL, curve_of, reached, snapshot_steps  # noqa: E402

RESULTS = ROOT / "bench" / "results"
TOPOLOGY = ROOT / "examples" / "topologies" / "acme_distributed.yaml"


def topo(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "TOPO_HOME": str(cwd / ".h")}
    return subprocess.run(
        [sys.executable, "-m", "topo", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start(cwd: Path, *args: str) -> Path:
    """``topo run ARGS -d``: the run directory of the run it started."""
    done = topo("run", *args, "-d", cwd=cwd)
    if done.returncode != 0:
        raise RuntimeError(f"topo run {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return Path(done.stdout.split()[1])


def wait_until(run_dir: Path, done: Any, cap_s: float) -> list[dict[str, float]]:
    """Follow the evaluator until ``done(curve)`` or ``cap_s`` seconds."""
    end = time.monotonic() + cap_s
    curve = curve_of(run_dir)
    while time.monotonic() < end and not done(curve):
        time.sleep(1.0)
        curve = curve_of(run_dir)
    return curve


def launcher_pid(run_dir: Path) -> int:
    return int(json.loads((run_dir / "status.json").read_text())["launcher"]["pid"])


def one_seed(
    seed: int, work: Path, every_s: float, crash_at: float, cap_s: float
) -> dict[str, Any]:
    params = [
        "-p", f"seed={seed}", "-p", "max_actor_steps=null", "-p", "eval_episodes=20",
        "-p", "eval_every_s=5.0", "-p", "num_actors=2",
    ]  # fmt: skip
    # Both runs take snapshots on the same clock: only the crash differs. (A snapshot's
    # pause costs time, not actor steps, which are what is compared.)
    params += ["-p", f"checkpoint_every_s={every_s}"]
    topology = work / "acme_keep_all.yaml"  # the example, keeping every snapshot
    topology.write_text(f"extends: {TOPOLOGY}\nsnapshots: {{keep: 1000}}\n")
    # 1. uninterrupted
    t0 = time.monotonic()
    base_dir = start(work, str(topology), "-b", "procs", *params)
    base = wait_until(base_dir, reached, cap_s)
    base_s = time.monotonic() - t0
    topo("stop", str(base_dir), cwd=work)
    goal = reached(base)
    if goal is None:
        return {"seed": seed, "error": "the uninterrupted run did not reach 475", "base": base}
    kill_at = int(goal["actor_steps"] * crash_at)
    # 2. crashed at ~60 %, resumed
    t0 = time.monotonic()
    first_dir = start(work, str(topology), "-b", "procs", *params)
    before = wait_until(first_dir, lambda c: c and c[-1]["actor_steps"] >= kill_at, cap_s)
    os.kill(launcher_pid(first_dir), signal.SIGKILL)
    killed_at = before[-1]["actor_steps"] if before else 0
    time.sleep(3.0)  # the nodes end with their launcher
    snaps = sorted(
        (int(p.name), p) for p in (first_dir / "snapshots").iterdir() if p.name.isdigit()
    )
    manifest = json.loads((snaps[-1][1] / "manifest.json").read_text())
    resumed_from = int(manifest["counts"].get("counter", {}).get("actor_steps", 0))
    second_dir = start(work, "--resume", str(first_dir))
    after = wait_until(second_dir, reached, cap_s)
    crashed_s = time.monotonic() - t0
    topo("stop", str(second_dir), cwd=work)
    goal_after = reached(after)
    executed = None
    if goal_after is not None:
        # what the actors really ran: up to the kill, then from the snapshot's count on
        executed = killed_at + (goal_after["actor_steps"] - resumed_from)
    paired = branch_from(work, base_dir, goal["actor_steps"] * crash_at, cap_s)
    return {
        "seed": seed,
        "base_steps_to_goal": goal["actor_steps"],
        "kill_at_steps": killed_at,
        "snapshot_steps": resumed_from,
        "snapshot_pause_s": manifest["pause_s"],
        "snapshot_bytes": sum(n["size"] for n in manifest["nodes"].values()),
        "snapshots_taken": len(snaps),
        "last_before": before[-1]["mean_return"] if before else None,
        "first_after": after[0]["mean_return"] if after else None,
        "crashed_steps_to_goal": executed,
        "ratio": None if executed is None else round(executed / goal["actor_steps"], 3),
        "base_s": round(base_s, 1),
        "crashed_s": round(crashed_s, 1),
        "base": base,
        "before": before,
        "after": after,
        **paired,
    }


def branch_from(work: Path, base_dir: Path, crash_steps: float, cap_s: float) -> dict[str, Any]:
    """The paired measurement: the uninterrupted run, and a crash of that same run at
    ``crash_steps``. The crash is taken as the worst case, just before the snapshot after
    the newest one: everything since that one is lost. ``topo run --resume`` from the
    newest snapshot before the crash then runs until 475; the two share their history up to
    that snapshot, so only what comes after it (the resume) can differ."""
    snaps = list(snapshot_steps(base_dir).items())
    before = [s for s in snaps if s[1] <= crash_steps]
    if not before or before[-1] == snaps[-1]:
        return {"paired_error": "no snapshot before and after the crash point"}
    number, at = before[-1]
    lost_until = snaps[snaps.index(before[-1]) + 1][1]
    run_dir = start(work, "--resume", str(base_dir), "--snapshot", str(number))
    curve = wait_until(run_dir, reached, cap_s)
    topo("stop", str(run_dir), cwd=work)
    goal = reached(curve)
    return {
        "paired_snapshot_steps": at,
        "paired_crash_steps": lost_until,
        "paired_after": curve,
        "paired_steps_to_goal": None if goal is None else lost_until + (goal["actor_steps"] - at),
    }


def plot(results: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(6 * len(results), 4), squeeze=False)
    for ax, r in zip(axes[0], results, strict=True):
        if "base" in r:
            xs = [p["actor_steps"] for p in r["base"]]
            ax.plot(xs, [p["mean_return"] for p in r["base"]], ".-", label="uninterrupted")
        if r.get("before"):
            xs = [p["actor_steps"] for p in r["before"]]
            ax.plot(
                xs, [p["mean_return"] for p in r["before"]], ".-", label="crashed: before the kill"
            )
            shift = r["kill_at_steps"] - r["snapshot_steps"]
            xs = [p["actor_steps"] + shift for p in r["after"]]
            ax.plot(xs, [p["mean_return"] for p in r["after"]], "o-", label="resumed")
            ax.axvline(r["kill_at_steps"], color="grey", linestyle=":", label="launcher killed")
        if r.get("paired_after"):
            shift = r["paired_crash_steps"] - r["paired_snapshot_steps"]
            xs = [p["actor_steps"] + shift for p in r["paired_after"]]
            ys = [p["mean_return"] for p in r["paired_after"]]
            ax.plot(xs, ys, "s--", label="uninterrupted run, crashed and resumed (paired)")
        ax.axhline(GOAL, color="black", linewidth=0.5)
        ax.set_title(f"seed {r['seed']}")
        ax.set_xlabel("actor steps executed")
        ax.set_ylabel("mean return (20 episodes)")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)


def jump(a: float | None, b: float | None) -> float | None:
    """Relative change from evaluation ``a`` to evaluation ``b``."""
    return None if a is None or b is None or a <= 0 else abs(b - a) / a


def eval_noise(curve: list[dict[str, float]]) -> float | None:
    """Median relative change between two consecutive evaluations of one run, below 475
    (the baseline for "the first evaluation after the resume is within 10 %")."""
    points = [p["mean_return"] for p in curve]
    jumps = [jump(a, b) for a, b in itertools.pairwise(points) if a < GOAL]
    found = [j for j in jumps if j is not None]
    return statistics.median(found) if found else None


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over seeds: steps to 475 with and without the crash, and their ratio."""
    ok = [r for r in results if r.get("crashed_steps_to_goal") is not None]
    if not ok:
        return {}
    base = statistics.median(r["base_steps_to_goal"] for r in ok)
    crashed = statistics.median(r["crashed_steps_to_goal"] for r in ok)
    lost = statistics.median(r["kill_at_steps"] - r["snapshot_steps"] for r in ok)
    jumps = [jump(r["last_before"], r["first_after"]) for r in ok]
    noise = [n for n in (eval_noise(r["base"]) for r in ok) if n is not None]
    pairs = [
        r["paired_steps_to_goal"] / r["base_steps_to_goal"]
        for r in results
        if r.get("paired_steps_to_goal") is not None
    ]
    return {
        "paired_seeds": len(pairs),
        "median_paired_branch_ratio": round(statistics.median(pairs), 3) if pairs else None,
        "paired_branch_ratios": [round(x, 3) for x in pairs],
        "seeds": len(ok),
        "median_base_steps": base,
        "median_crashed_steps": crashed,
        "ratio_of_medians": round(crashed / base, 3),
        "median_paired_ratio": statistics.median(r["ratio"] for r in ok),
        "median_lost_steps": lost,
        "median_resume_jump": statistics.median(j for j in jumps if j is not None),
        "median_eval_noise": statistics.median(noise) if noise else None,
    }


def markdown(report: dict[str, Any]) -> str:
    rows = [
        "| seed | uninterrupted: steps to 475 | killed at | snapshot at | lost steps | "
        "last eval before | first eval after | with the crash: steps to 475 | ratio | "
        "wall time (uninterrupted / crashed) | pause | size |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in report["results"]:
        if "error" in r:
            rows.append(f"| {r['seed']} | {r['error']} |||||||||||")
            continue
        rows.append(
            f"| {r['seed']} | {r['base_steps_to_goal']} | {r['kill_at_steps']} | "
            f"{r['snapshot_steps']} | {r['kill_at_steps'] - r['snapshot_steps']} | "
            f"{r['last_before']} | {r['first_after']} | "
            f"{r['crashed_steps_to_goal']} | {r['ratio']} | "
            f"{r.get('base_s', '?')} s / {r.get('crashed_s', '?')} s | "
            f"{r['snapshot_pause_s']:.2f}s | {r['snapshot_bytes'] / 2**20:.1f} MiB |"
        )
    s = summary(report["results"])
    if s:
        noise = s["median_eval_noise"]
        text = (
            f"Over {s['seeds']} seeds: median actor steps to 475 **{s['median_base_steps']:.0f}** "
            f"uninterrupted and **{s['median_crashed_steps']:.0f}** with the crash, a ratio of "
            f"medians of **{s['ratio_of_medians']:.2f}×** (goal ≤ 1.2×; median of the per-seed "
            f"ratios {s['median_paired_ratio']:.2f}×). Steps lost between the newest snapshot "
            f"and the kill: median {s['median_lost_steps']:.0f}. The first evaluation after the "
            f"resume differs from the last before the kill by a median "
            f"{s['median_resume_jump']:.0%}; two consecutive evaluations of the uninterrupted "
            f"runs (below 475) differ by a median "
            f"{'?' if noise is None else f'{noise:.0%}'} (the evaluation's own noise)."
        )
    else:
        text = "No seed reached 475 with the crash."
    if s.get("median_paired_branch_ratio") is not None:
        text += (
            f"\n\n**Paired** (the same run with and without the crash, sharing its history up "
            f"to the snapshot; the crash taken just before the next snapshot, the worst case): "
            f"median ratio **{s['median_paired_branch_ratio']:.2f}×** over "
            f"{s['paired_seeds']} seeds "
            f"({', '.join(f'{x:.2f}' for x in s['paired_branch_ratios'])})."
        )
        rows += [
            "",
            "| seed | uninterrupted: steps to 475 | resumed from its snapshot at | crash (worst "
            "case) at | with the crash: steps to 475 | ratio |",
            "|---|---|---|---|---|---|",
        ]
        for r in report["results"]:
            if r.get("paired_steps_to_goal") is None:
                continue
            rows.append(
                f"| {r['seed']} | {r['base_steps_to_goal']} | {r['paired_snapshot_steps']} | "
                f"{r['paired_crash_steps']} | {r['paired_steps_to_goal']} | "
                f"{r['paired_steps_to_goal'] / r['base_steps_to_goal']:.3f} |"
            )
    return (
        f"# Resume after a crash (bench/resume_bench.py)\n\n{report['command']}\n\n"
        f"Snapshots every {report['every_s']} s in both runs; the launcher SIGKILLed at "
        f"{report['crash_at']:.0%} of the uninterrupted run's steps to 475. "
        f"Load average at the end: {', '.join(f'{x:.1f}' for x in report['load'])}.\n\n"
        f"{text}\n\n" + "\n".join(rows) + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--every-s", type=float, default=5.0)
    parser.add_argument("--crash-at", type=float, default=0.6)
    parser.add_argument("--cap-s", type=float, default=600.0)
    parser.add_argument("--out", default="resume")
    parser.add_argument("--replot", action="store_true", help="Redraw <out>.md/.png from .json.")
    args = parser.parse_args()
    if args.replot:
        report = json.loads((RESULTS / f"{args.out}.json").read_text())
        (RESULTS / f"{args.out}.md").write_text(markdown(report))
        plot(report["results"], RESULTS / f"{args.out}.png")
        return
    with tempfile.TemporaryDirectory(prefix="resume-bench-") as tmp:
        results = [
            one_seed(seed, Path(tmp), args.every_s, args.crash_at, args.cap_s)
            for seed in args.seeds
        ]
    report = {
        "command": "`" + " ".join(["python", "bench/resume_bench.py", *sys.argv[1:]]) + "`",
        "every_s": args.every_s,
        "crash_at": args.crash_at,
        "load": os.getloadavg(),
        "results": results,
        "summary": summary(results),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.out}.json").write_text(json.dumps(report, indent=1))
    (RESULTS / f"{args.out}.md").write_text(markdown(report))
    plot(results, RESULTS / f"{args.out}.png")
    print(markdown(report))


if __name__ == "__main__":
    main()
