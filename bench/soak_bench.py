"""Soak: memory of nodes that keep calling many peers, over a long run (procs backend).

N courier nodes (default 50) each call ``--peers`` others (default 25) in turn, paced
(``--rate`` calls per second per node, blocking calls with a deadline), for
``--minutes`` (default 60; 10 is enough for CI). Every ``--every`` seconds the RSS of
each node's process is sampled. Reported: the RSS per node at start and end, and the
slope of a least-squares line through each node's samples after the warm-up (the first
``--warmup`` minutes): MiB per minute, median and worst over the nodes. A node whose
native memory grows with calls (sockets, identities or buffers never freed, malloc
fragmentation) shows a positive slope; a flat run stays near 0.

What grows at first is libzmq's message queue storage: each pipe of a connection keeps
up to two chunks of 256 message slots, reached during the connection's first ~500
messages and reused after (about 64-100 KiB per connection, ~4 MiB for a node with 50
connections). At 20 calls/s spread over 25 peers that takes ~11 minutes, which looks
like a linear leak in a 10-minute run (``soak-before``); at 50 calls/s it is over in ~5
minutes and the RSS stays flat after (``soak-plateau``, ``soak-after``).

Run:  ``.venv/bin/python bench/soak_bench.py [--minutes 10] [--nodes 50] [--label NAME]``.
Writes bench/results/soak[-LABEL].json and bench/results/soak[-LABEL].md.
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

import psutil

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
for _p in (str(ROOT), str(HERE)):  # the fork server imports this module for Caller
    if _p not in sys.path:
        sys.path.insert(0, _p)

MIB = 1 << 20


class Caller:
    """Serves ``ping``; its ``run`` calls ``peers`` other nodes in turn, ``rate`` a second."""

    def __init__(self, nodes: int, peers: int, rate: float, payload: int) -> None:
        self.nodes = nodes
        self.peers = peers
        self.rate = rate
        self.payload = b"x" * payload
        self.calls = 0
        self.errors = 0

    def ping(self, data: bytes) -> int:
        return len(data)

    def stats(self) -> tuple[int, int]:
        return self.calls, self.errors

    def run(self) -> None:
        import topo
        from topo.runtime import Handle

        me = topo.current_node().replica
        picks = [(me + 1 + k) % self.nodes for k in range(min(self.peers, self.nodes - 1))]
        handles = [Handle(f"node/{i}", 10.0) for i in picks]
        stop = topo.stop_event()
        period = 1.0 / self.rate
        next_at = time.monotonic()
        i = 0
        while not stop.is_set():
            try:
                handles[i % len(handles)].ping(self.payload)
                self.calls += 1
            except Exception:
                self.errors += 1
            i += 1
            next_at += period
            delay = next_at - time.monotonic()
            if delay > 0:
                stop.wait(delay)
            else:
                next_at = time.monotonic()


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points (0 with fewer than two)."""
    if len(points) < 2:
        return 0.0
    mx = statistics.fmean(x for x, _ in points)
    my = statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx == 0:
        return 0.0
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def _rss(pids: dict[str, int]) -> dict[str, float]:
    out = {}
    for exe, pid in pids.items():
        try:
            out[exe] = psutil.Process(pid).memory_info().rss / MIB
        except psutil.Error:
            continue
    return out


def soak(args: argparse.Namespace) -> dict[str, Any]:
    """Run the soak; the samples and per-node slopes."""
    import topo

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "soak.yaml"
        path.write_text(
            f"name: soak{args.nodes}\nnodes:\n  node:\n    target: 'soak_bench:Caller'\n"
            f"    count: {args.nodes}\n"
            f"    args: {{nodes: {args.nodes}, peers: {args.peers}, rate: {args.rate}, "
            f"payload: {args.payload}}}\n"
        )
        run = topo.launch(path, backend="procs", log_dir=Path(tmp) / "runs")
        samples: list[tuple[float, dict[str, float]]] = []
        try:
            assert run.wait_ready(300), "the nodes did not become ready"
            pids = dict(run.launcher.pids())
            t0 = time.monotonic()
            end = t0 + args.minutes * 60
            while True:
                now = time.monotonic()
                samples.append(((now - t0) / 60, _rss(pids)))
                if now >= end:
                    break
                time.sleep(min(args.every, max(0.0, end - now)))
            calls = errors = 0
            for i in range(args.nodes):
                c, e = run.handle(f"node/{i}", 30.0).stats()
                calls, errors = calls + c, errors + e
            restarts = sum(n.restarts for n in run.launcher.state.nodes.values())
        finally:
            run.stop(timeout=120)
    warm = [(t, rss) for t, rss in samples if t >= args.warmup]
    slopes = {exe: slope([(t, rss[exe]) for t, rss in warm if exe in rss]) for exe in samples[0][1]}
    # The same fit over each third of the run: growth that stops shows as a falling slope.
    span = samples[-1][0] or 1.0
    thirds = []
    for k in range(3):
        part = [(t, r) for t, r in samples if k * span / 3 <= t <= (k + 1) * span / 3]
        thirds.append(
            statistics.median(
                slope([(t, r[exe]) for t, r in part if exe in r]) for exe in samples[0][1]
            )
        )
    first, last = samples[0][1], samples[-1][1]
    return {
        "nodes": args.nodes,
        "peers": args.peers,
        "rate_per_node": args.rate,
        "payload_bytes": args.payload,
        "minutes": args.minutes,
        "warmup_minutes": args.warmup,
        "calls": calls,
        "call_errors": errors,
        "restarts": restarts,
        "rss_start_mib_median": statistics.median(first.values()),
        "rss_end_mib_median": statistics.median(last.values()),
        "slope_mib_per_min_median": statistics.median(slopes.values()),
        "slope_mib_per_min_max": max(slopes.values()),
        "slope_mib_per_min_min": min(slopes.values()),
        "slope_mib_per_min_by_third": thirds,
        "calls_per_connection": calls / max(1, args.nodes * min(args.peers, args.nodes - 1)),
        "slopes": slopes,
        "samples": [
            {"t_min": round(t, 3), "rss_mib": {k: round(v, 2) for k, v in rss.items()}}
            for t, rss in samples
        ],
    }


def report(r: dict[str, Any], meta: dict[str, Any]) -> str:
    """The results as markdown."""
    med = [statistics.median(s["rss_mib"].values()) for s in r["samples"] if s["rss_mib"]]
    marks = sorted({0, len(med) // 4, len(med) // 2, 3 * len(med) // 4, len(med) - 1})
    rows = [f"| {r['samples'][i]['t_min']:.1f} | {med[i]:.2f} |" for i in marks]
    env = meta.get("env", {})
    return "\n".join(
        [
            f"# Soak ({meta['label'] or 'default'}): memory of nodes calling many peers",
            "",
            f"{r['nodes']} nodes on procs, each calling {r['peers']} peers in turn at "
            f"{r['rate_per_node']:g} calls/s ({r['payload_bytes']} B payload), for "
            f"{r['minutes']:g} min: {r['calls']} calls, {r['call_errors']} errors, "
            f"{r['restarts']} restarts. Load average {meta['load_avg_start']:.1f} → "
            f"{meta['load_avg_end']:.1f} on {meta['cpus']} CPUs (shared machine). "
            f"{meta['commit']}{' ' + json.dumps(env) if env else ''}",
            "",
            f"RSS per node, median: {r['rss_start_mib_median']:.2f} MiB at the start, "
            f"{r['rss_end_mib_median']:.2f} MiB at the end.",
            "",
            f"Slope of RSS after the first {r['warmup_minutes']:g} min (least squares, per "
            f"node): **median {r['slope_mib_per_min_median']:+.4f} MiB/min**, "
            f"min {r['slope_mib_per_min_min']:+.4f}, max {r['slope_mib_per_min_max']:+.4f}.",
            "",
            "Median slope over each third of the run: "
            + ", ".join(f"{v:+.4f}" for v in r["slope_mib_per_min_by_third"])
            + f" MiB/min; {r['calls_per_connection']:.0f} calls went over each "
            "caller-to-peer connection.",
            "",
            "| minute | median RSS (MiB) |",
            "| ---: | ---: |",
            *rows,
            "",
            "Rerun: `.venv/bin/python bench/soak_bench.py --minutes 10` "
            "(default: 50 nodes for 60 minutes)",
            "",
        ]
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--peers", type=int, default=25)
    ap.add_argument("--rate", type=float, default=20.0, help="calls per second per node")
    ap.add_argument("--payload", type=int, default=256, help="bytes per call")
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--warmup", type=float, default=1.0, help="minutes left out of the fit")
    ap.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    ap.add_argument("--label", default="", help="results go to soak-LABEL.{json,md}")
    a = ap.parse_args()
    load0 = os.getloadavg()[0]
    r = soak(a)
    commit = os.popen(f"git -C {ROOT} rev-parse --short HEAD 2>/dev/null").read().strip()
    meta = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_avg_start": load0,
        "load_avg_end": os.getloadavg()[0],
        "label": a.label,
        "commit": f"Commit {commit}." if commit else "",
        "env": {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")},
    }
    out = ROOT / "bench" / "results"
    out.mkdir(parents=True, exist_ok=True)
    name = f"soak-{a.label}" if a.label else "soak"
    (out / f"{name}.json").write_text(json.dumps({"meta": meta, "result": r}, indent=1) + "\n")
    text = report(r, meta)
    (out / f"{name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
