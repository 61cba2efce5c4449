"""What a CPU-bound program leaves to the rest of the machine, by its group's niceness.

Where Linux schedules by autogroup, topo's fork server starts a session of its own and the
whole program competes as one scheduling group; a node's own niceness counts only inside
it. This runs Launchpad's consumer_producers with nine producers hashing on every core
(``topo run -d``) and measures, from this process's session (where a browser, a test or a
shell would be), a probe that alternates 10 ms of sleep and 10 ms of work: its share of
a core (0.5 at most) and how late its timer wakes it. Conditions, in turn each round:
the program's group at niceness 0 (as ``topo run``), at 19 (as ``nice -n 19 topo run``),
and, in the same run, no program at all (the baseline).

Run:  ``.venv/bin/python bench/autogroup_bench.py [--window 5] [--rounds 3]``.
Writes bench/results/autogroup.json and bench/results/autogroup.md.
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
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
TOPO = [sys.executable, "-m", "topo"]

PROBE = """
import json, sys, time
window = float(sys.argv[1])
late = []
t0, c0 = time.monotonic(), time.process_time()
while time.monotonic() - t0 < window:
    s = time.perf_counter()
    time.sleep(0.01)
    late.append(time.perf_counter() - s - 0.01)
    end = time.process_time() + 0.01
    while time.process_time() < end:
        pass
late.sort()
print(json.dumps({
    "share": (time.process_time() - c0) / (time.monotonic() - t0),
    "late_p50_ms": 1e3 * late[len(late) // 2],
    "late_p95_ms": 1e3 * late[int(len(late) * 0.95)],
}))
"""


def probe(window: float) -> dict[str, float]:
    """One probe in a child process of this one (this session's scheduling group)."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE, str(window)], capture_output=True, text=True, check=True
    )
    result: dict[str, float] = json.loads(out.stdout)
    return result


def autogroup(pid: int) -> str:
    """``/proc/PID/autogroup`` ("/autogroup-56 nice 0"), or "" without autogroups."""
    try:
        return Path(f"/proc/{pid}/autogroup").read_text().strip()
    except OSError:
        return ""


def start_program(tmp: Path) -> tuple[str, Path, int]:
    """consumer_producers, nine producers hashing, detached: (run id, run dir, a pid)."""
    example = ROOT / "examples" / "topologies" / "consumer_producers.yaml"
    topology = tmp / "cp.yaml"
    topology.write_text(
        f"extends: {example}\n"
        "nodes:\n"
        '  producer:\n    args: {producer_id: "${replica}", rounds: 1000000}\n'
        "  consumer:\n    rpc: {deadline_s: 3600}\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOPO_HOME": str(tmp / "home")}
    args = [str(topology), "-p", "num_producers=9", "-p", "work_items=20000", "-d"]
    done = subprocess.run(
        [*TOPO, "run", *args], cwd=tmp, env=env, capture_output=True, text=True, check=True
    )
    run_id, run_dir = done.stdout.split()[:2]
    for _ in range(100):  # status.json follows the start by a moment
        status = json.loads((Path(run_dir) / "status.json").read_text())
        pids = [n["pid"] for n in status["nodes"] if n["id"] == "producer/0" and n["pid"]]
        if pids:
            return run_id, Path(run_dir), int(pids[0])
        time.sleep(0.1)
    stop_program(tmp, run_id)
    raise SystemExit("producer/0 has no pid in status.json")


def stop_program(tmp: Path, run_id: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TOPO_HOME": str(tmp / "home")}
    subprocess.run([*TOPO, "stop", run_id], cwd=tmp, env=env, capture_output=True, timeout=120)


def measure(window: float, rounds: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, float]]] = {"no program": [], "group 0": [], "group 19": []}
    for _ in range(rounds):
        runs["no program"].append(probe(window))
    group = ""
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        run_id, _run_dir, pid = start_program(tmp)
        try:
            time.sleep(5)  # every producer busy
            group = autogroup(pid)
            if not group:
                raise SystemExit("no autogroup scheduling here: nothing to measure")
            for _ in range(rounds):
                for nice in (0, 19):
                    Path(f"/proc/{pid}/autogroup").write_text(str(nice))
                    time.sleep(1)
                    runs[f"group {nice}"].append(probe(window))
        finally:
            stop_program(tmp, run_id)
    return {
        "window_s": window,
        "rounds": rounds,
        "program_group": group,
        "runs": runs,
        "median": {
            cond: {key: statistics.median(r[key] for r in rs) for key in rs[0]}
            for cond, rs in runs.items()
        },
    }


def report(result: dict[str, Any]) -> str:
    med = result["median"]
    base = med["no program"]["share"]
    lines = [
        "# What a CPU-bound program leaves to the rest of the machine",
        "",
        f"`python bench/autogroup_bench.py --window {result['window_s']:g} "
        f"--rounds {result['rounds']}` on {platform.node()} ({os.cpu_count()} cores, "
        f"Linux {platform.release()}): consumer_producers with nine producers hashing; a "
        "probe in the benchmark's session alternating 10 ms of sleep and 10 ms of work "
        "(0.5 of a core at most). Medians over the rounds.",
        "",
        "| the program's scheduling group | probe's share of a core | vs no program "
        "| timer late, p50 | p95 |",
        "|---|---:|---:|---:|---:|",
    ]
    for cond in ("no program", "group 0", "group 19"):
        m = med[cond]
        lines.append(
            f"| {cond} | {m['share']:.2f} | {m['share'] / base:.2f}× "
            f"| {m['late_p50_ms']:.1f} ms | {m['late_p95_ms']:.1f} ms |"
        )
    lines += [
        "",
        "Every round: "
        + "; ".join(
            f"{cond} " + ", ".join(f"{r['share']:.2f}" for r in rs)
            for cond, rs in result["runs"].items()
        ),
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window", type=float, default=5.0, help="seconds a probe runs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default="autogroup")
    opts = parser.parse_args()
    result = measure(opts.window, opts.rounds)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{opts.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    text = report(result)
    (RESULTS / f"{opts.out}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
