"""Calls in flight: what a caller pays while many of its futures wait on a slow node.

A consumer that fans out thousands of work items (Launchpad's consumer_producers with a
large ``work_items``) holds thousands of futures for minutes. The futures engine looks
for calls past their deadline every 10 ms; this measures the CPU of the calling process
(this one: the launcher and the caller) over a window with N calls in flight to a node
that holds each call, against N = 0 measured in the same run.

Run:  ``.venv/bin/python bench/inflight_bench.py [--window 5] [--rounds 3]``.
Writes bench/results/inflight.json and bench/results/inflight.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE)]

COUNTS = (0, 1000, 20000)


class Holder:
    """A node whose calls are answered at a given time (every call waits till then)."""

    def hold(self, until: float) -> int:
        time.sleep(max(0.0, until - time.time()))
        return 1


def window_cpu(window: float) -> float:
    """Share of one core this process used over ``window`` seconds."""
    c0, t0 = time.process_time(), time.monotonic()
    time.sleep(window)
    return 100 * (time.process_time() - c0) / (time.monotonic() - t0)


def measure(window: float, rounds: int) -> dict[str, Any]:
    """Median core share of this process with each count of calls in flight."""
    import topo

    shares: dict[int, list[float]] = {n: [] for n in COUNTS}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "inflight.yaml"
        # the handler threads hold the first calls; the others queue at the node
        path.write_text(
            "name: inflight\nnodes:\n  holder:\n    target: 'inflight_bench:Holder'\n"
            "    rpc: {threads: 4, deadline_s: 3600}\n"
        )
        run = topo.launch(path, backend="procs", log_dir=Path(tmp) / "runs")
        try:
            assert run.wait_ready(120), "the node did not become ready"
            holder = run.handle("holder")
            for _ in range(rounds):
                for n in COUNTS:  # each count in turn: the machine's noise falls on all
                    until = time.time() + window + 3.0
                    calls = [holder.futures.hold(until) for _ in range(n)]
                    time.sleep(1.0)  # sent, and the node's queue settled
                    shares[n].append(window_cpu(window))
                    assert not any(c.done() for c in calls), "a held call was answered"
                    assert all(c.result(timeout=600) == 1 for c in calls)
        finally:
            run.stop(timeout=60)
    base = statistics.median(shares[0])
    return {
        "window_s": window,
        "rounds": rounds,
        "core_share_pct": {str(n): shares[n] for n in COUNTS},
        "median_pct": {str(n): statistics.median(shares[n]) for n in COUNTS},
        "over_baseline_pct": {str(n): statistics.median(shares[n]) - base for n in COUNTS},
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--window", type=float, default=5.0)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    load0 = os.getloadavg()[0]
    r = measure(a.window, a.rounds)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_avg_start": load0,
        "load_avg_end": os.getloadavg()[0],
    }
    (out / "inflight.json").write_text(json.dumps({"meta": meta, "result": r}, indent=2) + "\n")
    rows = [
        f"| {int(n):,} | {r['median_pct'][n]:.1f} % | {r['over_baseline_pct'][n]:+.1f} % |"
        for n in r["median_pct"]
    ]
    text = "\n".join(
        [
            "# Calls in flight: the caller's CPU",
            "",
            f"CPU of the calling process (launcher and caller) while N futures wait on a "
            f"node that holds them; median of {r['rounds']} windows of {r['window_s']:g} s, "
            f"against N = 0 in the same run. Load average {load0:.1f} → "
            f"{meta['load_avg_end']:.1f} on {os.cpu_count()} CPUs.",
            "",
            "| calls in flight | share of one core | over N = 0 |",
            "|---:|---:|---:|",
            *rows,
            "",
            "Rerun: `.venv/bin/python bench/inflight_bench.py`",
            "",
        ]
    )
    (out / "inflight.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
