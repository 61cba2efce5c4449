"""Idle cost: CPU used by a running topology whose nodes have nothing to do.

Launches N trivial courier nodes on ``procs``, waits until all are ready and a
little more (so start-up work is over), then measures the CPU time of the
launcher and every node process over a window, as a share of one core. A node
that polls, or a handler pool that ticks while idle, shows up here.

Run:  ``.venv/bin/python bench/idle_bench.py [--nodes 300] [--window 10]``.
Writes bench/results/idle.json and bench/results/idle.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE)]


class Trivial:
    """A courier node with one method and no ``run``."""

    def ping(self) -> int:
        return 1


def _cpu(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
    return total


def measure(nodes: int, window: float, settle: float) -> dict[str, float]:
    """Share of one core used by the launcher and its node processes while idle."""
    import topo

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "idle.yaml"
        path.write_text(
            f"name: idle{nodes}\nnodes:\n  node:\n    target: 'idle_bench:Trivial'\n"
            f"    count: {nodes}\n"
        )
        run = topo.launch(path, backend="procs", log_dir=Path(tmp) / "runs")
        try:
            assert run.wait_ready(120), "the nodes did not become ready"
            for i in range(0, nodes, max(1, nodes // 10)):  # some served a call
                assert run.handle(f"node/{i}").ping() == 1
            time.sleep(settle)
            me = psutil.Process()
            procs = [me, *me.children(recursive=True)]
            c0, t0 = _cpu(procs), time.monotonic()
            time.sleep(window)
            used = _cpu(procs) - c0
            elapsed = time.monotonic() - t0
        finally:
            run.stop(timeout=60)
    return {
        "nodes": nodes,
        "processes": len(procs),
        "window_s": elapsed,
        "core_share_pct": 100 * used / elapsed,
        "per_node_pct": 100 * used / elapsed / nodes,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=300)
    ap.add_argument("--window", type=float, default=10.0)
    ap.add_argument("--settle", type=float, default=3.0)
    a = ap.parse_args()
    load0 = os.getloadavg()[0]
    r = measure(a.nodes, a.window, a.settle)
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_avg_start": load0,
        "load_avg_end": os.getloadavg()[0],
    }
    (out / "idle.json").write_text(json.dumps({"meta": meta, "result": r}, indent=2) + "\n")
    text = "\n".join(
        [
            "# Idle cost (procs backend)",
            "",
            f"{r['nodes']} idle courier nodes ({r['processes']} processes with the launcher), "
            f"CPU over {r['window_s']:.1f} s after start-up: **{r['core_share_pct']:.1f} % "
            f"of one core** ({r['per_node_pct']:.3f} % per node). Load average "
            f"{load0:.1f} → {meta['load_avg_end']:.1f} on {os.cpu_count()} CPUs.",
            "",
            "Rerun: `.venv/bin/python bench/idle_bench.py`",
            "",
        ]
    )
    (out / "idle.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
