"""Start-up cost of a Reverb node on procs: launch until ready, against a Counter node.

Both one-node programs are launched in turn (A B A B ...) in this process with
``topo.launch(..., backend="procs")``; the figure is the time until every node is
up, median of ``--repeats``. Writes bench/results/reverb_start.json and .md.
Rerun: ``.venv/bin/python bench/reverb_start_bench.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "nodes"))  # reverb_nodes: a one-table factory
RESULTS = ROOT / "bench" / "results"

TOPOLOGIES = {
    "reverb": (
        "name: lone_reverb\nnodes:\n  replay: {kind: reverb, tables: 'reverb_nodes:make_tables'}\n"
    ),
    "counter": "name: lone_counter\nnodes:\n  counter: {target: 'topo.nodes:Counter'}\n",
}


def launch_to_ready(path: Path, log_dir: Path) -> float:
    """Seconds from ``topo.launch`` until every node is up (the run is then stopped)."""
    import topo

    start = time.perf_counter()
    run = topo.launch(path, backend="procs", log_dir=log_dir, ready_timeout=120)
    elapsed = time.perf_counter() - start
    run.stop(timeout=60)
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    times: dict[str, list[float]] = {k: [] for k in TOPOLOGIES}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for name, text in TOPOLOGIES.items():
            paths[name] = Path(tmp) / f"{name}.yaml"
            paths[name].write_text(text)
        for _ in range(args.repeats):
            for name, path in paths.items():
                times[name].append(launch_to_ready(path, Path(tmp) / "runs"))
    med = {k: statistics.median(v) for k, v in times.items()}
    result = {
        "repeats": args.repeats,
        "load_avg_1m": os.getloadavg()[0],
        "seconds": times,
        "median_s": med,
        "ratio": med["reverb"] / med["counter"],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "reverb_start.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [
        "# Reverb node start-up (procs backend)",
        "",
        f"`.venv/bin/python bench/reverb_start_bench.py` — {args.repeats} launches of each "
        "one-node program, interleaved; time from `topo.launch` until the node is ready.",
        "",
        "| program | median s | min s | max s |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, values in times.items():
        lines.append(f"| lone {name} | {med[name]:.2f} | {min(values):.2f} | {max(values):.2f} |")
    lines += [
        "",
        f"Ratio reverb / counter: {result['ratio']:.1f}×. Load average (1 min) at the end: "
        f"{result['load_avg_1m']:.1f} on {os.cpu_count()} CPUs.",
    ]
    (RESULTS / "reverb_start.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
