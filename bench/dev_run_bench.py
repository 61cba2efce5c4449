"""The README's main job, ``./dev run``, run several times as a new user would: each
run in a fresh clone of this repository's HEAD (its set-up included, timed apart), or
with ``--in-place`` the same program in this checkout (for trying settings: extra
arguments after ``--`` go to ``topo run``).

For each run: the set-up's and the program's wall time, the evaluations it printed (the
return climbing), its final evaluation, why it stopped, and whether the final return
reached ``--goal`` (475: CartPole-v1 solved). Writes bench/results/<out>.json and .md.

    .venv/bin/python bench/dev_run_bench.py --runs 5
    .venv/bin/python bench/dev_run_bench.py --runs 3 --in-place --out dev_run_try -- -p num_actors=2
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TOPOLOGY = "examples/topologies/acme_distributed.yaml"
FINAL = re.compile(r"final evaluation return: (-?[\d.]+) \(mean of (\d+) episodes\)")
PERIODIC = re.compile(
    r"evaluator: +([\d.]+)s actor_steps=(\d+) learner_steps=(\d+) mean return over \d+ "
    r"episodes: (-?[\d.]+)"
)
STOPPED = re.compile(r"(?:stopping|stopped): (.+?)(?: —|\(|$)")


def one_run(index: int, in_place: bool, extra: list[str], cap_s: float) -> dict[str, Any]:
    """One ``./dev run`` (a fresh clone) or one ``topo run`` of the main job here."""
    where = ROOT
    setup_s = None
    temp = None
    if not in_place:
        temp = Path(tempfile.mkdtemp(prefix="topo-devrun-"))
        where = temp / "topo"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(where)], check=True)
        started = time.monotonic()
        subprocess.run(["bash", "./dev", "setup"], cwd=where, check=True, capture_output=True)
        setup_s = time.monotonic() - started
        argv = ["bash", "./dev", "run", *extra]
    else:
        argv = [str(ROOT / ".venv" / "bin" / "topo"), "run", TOPOLOGY, "--backend=procs", *extra]
    started = time.monotonic()
    done = subprocess.run(
        argv, cwd=where, capture_output=True, text=True, timeout=cap_s, env=_env()
    )
    wall = time.monotonic() - started
    out = done.stdout + done.stderr
    if temp is not None:
        shutil.rmtree(temp, ignore_errors=True)
    final = FINAL.findall(out)
    periodic = [
        {"elapsed_s": float(e), "actor_steps": int(a), "learner_steps": int(ls), "return": float(r)}
        for e, a, ls, r in PERIODIC.findall(out)
    ]
    reason = "evaluation reached stop_at_return" if "reached stop_at_return" in out else None
    if reason is None:
        found = STOPPED.findall(out)
        reason = found[-1].strip() if found else "?"
    return {
        "run": index,
        "exit_code": done.returncode,
        "setup_s": setup_s,
        "wall_s": round(wall, 1),
        "final_return": float(final[-1][0]) if final else None,
        "final_episodes": int(final[-1][1]) if final else None,
        "evaluations": periodic,
        "stopped": reason,
        "load_after": os.getloadavg()[0],
        "tail": out[-1500:] if done.returncode else "",
    }


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("TOPO_RUN_ID", None)
    return env


def write(runs: list[dict[str, Any]], args: argparse.Namespace, command: str) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    finals = [r["final_return"] for r in runs if r["final_return"] is not None]
    solved = sum(1 for f in finals if f >= args.goal)
    walls = [r["wall_s"] for r in runs]
    summary = {
        "command": command,
        "fresh_clones": not args.in_place,
        "extra_args": args.extra,
        "goal": args.goal,
        "solved": solved,
        "runs": runs,
        "median_wall_s": statistics.median(walls) if walls else None,
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    (RESULTS / f"{args.out}.json").write_text(json.dumps(summary, indent=1) + "\n")
    where = "in this checkout" if args.in_place else "a fresh clone of HEAD each run"
    lines = [
        "# The main job, `./dev run`, run as a new user would",
        "",
        f"Command: `{command}`; {where}; {os.cpu_count()} CPU(s); {summary['date']}.",
        "",
        f"**Final evaluation ≥ {args.goal:g} in {solved} of {len(runs)} runs**; "
        f"median wall time of the program {summary['median_wall_s']} s.",
        "",
        "| run | set-up (s) | program (s) | evaluations (return at actor steps) | final return "
        "| stopped by | load after |",
        "| ---: | ---: | ---: | --- | ---: | --- | ---: |",
    ]
    for r in runs:
        curve = ", ".join(
            f"{e['return']:.0f}@{e['actor_steps'] // 1000}k" for e in r["evaluations"]
        )
        final = (
            "none"
            if r["final_return"] is None
            else f"{r['final_return']:.1f} ({r['final_episodes']} ep.)"
        )
        setup = "-" if r["setup_s"] is None else f"{r['setup_s']:.0f}"
        lines.append(
            f"| {r['run']} | {setup} | {r['wall_s']:.0f} | {curve} | {final} | {r['stopped']} "
            f"| {r['load_after']:.1f} |"
        )
    (RESULTS / f"{args.out}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--in-place", action="store_true", help="no fresh clones")
    parser.add_argument("--goal", type=float, default=475.0)
    parser.add_argument("--cap-s", type=float, default=900.0, help="a run's time limit")
    parser.add_argument("--out", default="dev_run")
    parser.add_argument("extra", nargs="*", help="after --: arguments for topo run")
    args = parser.parse_args()
    command = "python bench/dev_run_bench.py " + " ".join(sys.argv[1:])
    runs = []
    for i in range(1, args.runs + 1):
        runs.append(one_run(i, args.in_place, args.extra, args.cap_s))
        r = runs[-1]
        print(f"run {i}: final {r['final_return']} in {r['wall_s']} s ({r['stopped']})", flush=True)
    write(runs, args, command)


if __name__ == "__main__":
    main()
