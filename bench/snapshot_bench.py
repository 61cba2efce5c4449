"""How long snapshots hold the DQN example, idle and beside busy loops (issue 46).

Each trial runs ``examples/topologies/acme_distributed.yaml`` on procs (2 actors, a
program snapshot every ``--every`` seconds, training that does not end by itself) for
``--seconds``, beside ``--busy`` loops (``yes > /dev/null``, ended by pid), then stops
it with Ctrl-C (one more snapshot at the stop). From the run's ``events.jsonl``: every
snapshot's pause (the program held), its size, and the share of the run's wall time the
program was held (the pauses over the time from the launch to the stop).

With ``--base REV`` each load is measured on that commit too (``git archive`` into a
folder, run from there with its own ``topo``), base and this tree alternating, so the
two sides share the machine's state. Run from the repository root:

    .venv/bin/python bench/snapshot_bench.py --busy 0 2 8 --seconds 120 --base 8f52df4

Writes bench/results/OUT.json and bench/results/OUT.md (``--out``, default snapshots).
"""

from __future__ import annotations

import argparse
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
PROGRAM = "examples/topologies/acme_distributed.yaml"


def export(rev: str, into: Path) -> str:
    """``rev``'s tree in ``into``; its short commit id."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.strip()
    into.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", commit], cwd=ROOT, check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(into)], check=False)
    return commit


def trial(code: Path, busy: int, seconds: float, every: float, log_dir: Path) -> dict[str, Any]:
    """One run of the program from ``code`` beside ``busy`` loops; its snapshots."""
    loops = [
        subprocess.Popen(["yes"], stdout=subprocess.DEVNULL, start_new_session=True)
        for _ in range(busy)
    ]
    env = {**os.environ, "PYTHONPATH": str(code)}
    argv = [sys.executable, "-m", "topo", "run", PROGRAM, "-b", "procs", "--no-live"]
    argv += ["--log-dir", str(log_dir), "-p", "num_actors=2", "-p", f"checkpoint_every_s={every}"]
    argv += ["-p", "max_actor_steps=100000000", "-p", "stop_at_return=100000"]
    try:
        began = time.monotonic()
        run = subprocess.Popen(
            argv, cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            run.wait(timeout=seconds)
            raise RuntimeError(f"the run ended by itself: {run.stderr.read()[-2000:]!r}")  # type: ignore[union-attr]
        except subprocess.TimeoutExpired:
            pass
        stopped_at = time.monotonic() - began
        run.send_signal(signal.SIGINT)
        run.wait(timeout=120)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    [events] = log_dir.glob("acme_distributed-*/events.jsonl")
    snaps = [
        e for e in map(json.loads, events.read_text().splitlines()) if e.get("kind") == "snapshot"
    ]
    pauses = [float(e["pause_s"]) for e in snaps if e.get("ok")]
    return {
        "busy": busy,
        "every_s": every,
        "seconds": stopped_at,
        "snapshots": len(pauses),
        "failed": len([e for e in snaps if not e.get("ok")]),
        "pauses_s": pauses,
        "sizes": [int(e["bytes"]) for e in snaps if e.get("ok")],
        "held_share": sum(pauses) / stopped_at,
        "messages": [e["message"] for e in snaps][-3:],
    }


def summary(t: dict[str, Any]) -> str:
    p = t["pauses_s"] or [0.0]
    return (
        f"{t['snapshots']} snapshots, pause median {statistics.median(p):.2f} s, "
        f"max {max(p):.2f} s, held {100 * t['held_share']:.1f} % of {t['seconds']:.0f} s"
    )


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "# Snapshot pauses of the DQN example (bench/snapshot_bench.py)",
        "",
        f"`{result['command']}` -- {result['time']}, {os.cpu_count()} CPUs (shared). "
        f"acme_distributed on procs, 2 actors, a snapshot every {result['every_s']:g} s, "
        f"{result['seconds']:g} s a run, then Ctrl-C (one more at the stop). Busy loops: "
        "`yes > /dev/null`, ended by pid. *held*: the pauses over the run's wall time.",
        "",
        "| code | busy loops | snapshots | pause median | pause p90 | pause max | held "
        "| last size |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for t in result["trials"]:
        p = sorted(t["pauses_s"]) or [0.0]
        p90 = p[min(len(p) - 1, int(0.9 * len(p)))]
        size = f"{t['sizes'][-1] / 2**20:.1f} MiB" if t["sizes"] else "-"
        lines.append(
            f"| {t['code']} | {t['busy']} | {t['snapshots']} | {statistics.median(p):.2f} s "
            f"| {p90:.2f} s | {max(p):.2f} s | {100 * t['held_share']:.1f} % | {size} |"
        )
    lines += ["", "Rerun: `" + result["command"] + "`", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, nargs="+", default=[0, 2, 8])
    parser.add_argument("--seconds", type=float, default=120.0)
    parser.add_argument("--every", type=float, default=5.0)
    parser.add_argument("--base", help="a commit to measure beside this tree")
    parser.add_argument("--out", default="snapshots")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="topo-snapshot-bench-"))
    codes = {"this tree": ROOT}
    if args.base:
        codes = {f"base {export(args.base, work / 'base')}": work / "base", **codes}
    trials: list[dict[str, Any]] = []
    for i, busy in enumerate(args.busy):
        order = list(codes.items())
        if i % 2:  # which side goes first alternates from one load to the next
            order.reverse()
        for name, code in order:
            t = trial(code, busy, args.seconds, args.every, work / f"runs-{len(trials)}")
            t["code"] = name
            trials.append(t)
            print(f"{name}, {busy} busy: {summary(t)}", flush=True)
    result = {
        "command": " ".join([".venv/bin/python", "bench/snapshot_bench.py", *sys.argv[1:]]),
        "time": time.strftime("%Y-%m-%d %H:%M %Z"),
        "every_s": args.every,
        "seconds": args.seconds,
        "trials": trials,
    }
    out = ROOT / "bench" / "results"
    (out / f"{args.out}.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / f"{args.out}.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
