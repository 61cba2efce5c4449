"""A clean stop of many busy nodes: does every node end within the grace?

N courier nodes (default 60) on procs each call ``--peers`` others in turn, paced, with
a 10 s call deadline (``soak_bench.Caller``: the program issue 46 saw lose nodes at its
stop). After ``--seconds`` of calls the run is stopped as Ctrl-C stops it (``topo run``'s
stop, with ``--grace`` seconds); the nodes killed at the grace's end are counted from the
run's warnings. Repeated ``--trials`` times; each trial's time from the stop to the end.

Run:  ``.venv/bin/python bench/stop_bench.py [--nodes 60] [--grace 3] [--trials 3]``.
Writes bench/results/stop[-LABEL].json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)

KILLED = re.compile(r"killed (\d+) executable\(s\) still running after the")


def trial(args: argparse.Namespace, tmp: Path, n: int) -> dict[str, Any]:
    """One run: start, calls for ``args.seconds``, the stop; what it cost."""
    import topo

    path = tmp / f"stop{n}.yaml"
    path.write_text(
        f"name: stop{args.nodes}\nnodes:\n  node:\n    target: 'soak_bench:Caller'\n"
        f"    count: {args.nodes}\n"
        f"    args: {{nodes: {args.nodes}, peers: {args.peers}, rate: {args.rate}, "
        f"payload: 256}}\n"
    )
    run = topo.launch(path, backend="procs", log_dir=tmp / "runs", grace_s=args.grace)
    assert run.wait_ready(300), "the nodes did not become ready"
    time.sleep(args.seconds)
    load = os.getloadavg()[0]
    asked = time.monotonic()
    code = run.stop(timeout=args.grace + 120)
    took = time.monotonic() - asked
    status = json.loads((run.run_dir / "status.json").read_text())
    killed = sum(int(m.group(1)) for w in status["warnings"] if (m := KILLED.search(w)))
    return {
        "exit": code,
        "stop_s": round(took, 2),
        "killed": killed,
        "load_at_stop": round(load, 1),
        "warnings": status["warnings"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=60)
    ap.add_argument("--peers", type=int, default=25)
    ap.add_argument("--rate", type=float, default=20.0, help="calls per second per node")
    ap.add_argument("--seconds", type=float, default=20.0, help="calls before the stop")
    ap.add_argument("--grace", type=float, default=3.0)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--label", default="")
    args = ap.parse_args()
    trials = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.trials):
            trials.append(trial(args, Path(tmp), n))
            print(json.dumps({k: v for k, v in trials[-1].items() if k != "warnings"}))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    result = {"args": vars(args), "commit": commit, "machine": platform.node(), "trials": trials}
    name = "stop" + (f"-{args.label}" if args.label else "")
    out = HERE / "results"
    (out / f"{name}.json").write_text(json.dumps(result, indent=1) + "\n")
    killed = [t["killed"] for t in trials]
    lines = [
        f"# A clean stop of {args.nodes} busy nodes ({args.label or 'default'})",
        "",
        f"{args.nodes} nodes on procs, each calling {args.peers} peers in turn at "
        f"{args.rate:g} calls/s (10 s deadline), stopped after {args.seconds:g} s with a "
        f"{args.grace:g} s grace; {args.trials} trials; commit {commit}, {os.cpu_count()} CPUs.",
        "",
        "| trial | exit | stop to end (s) | nodes killed at the grace's end | load at the stop |",
        "| ---: | ---: | ---: | ---: | ---: |",
        *(
            f"| {i + 1} | {t['exit']} | {t['stop_s']:.2f} | {t['killed']} | {t['load_at_stop']} |"
            for i, t in enumerate(trials)
        ),
        "",
        f"Killed in all: {sum(killed)} of {args.nodes * args.trials}; median stop "
        f"{statistics.median(t['stop_s'] for t in trials):.2f} s.",
        "",
        f"Rerun: `.venv/bin/python bench/stop_bench.py --nodes {args.nodes} --grace "
        f"{args.grace:g} --trials {args.trials}`",
        "",
    ]
    (out / f"{name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
