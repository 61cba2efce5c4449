"""Flood benchmark: one node prints N MB as fast as it can while ``topo run`` is piped.

For each backend (procs, threads) and each of ``--runs`` runs, ``topo run --no-live``
runs a node that prints ``--mb`` MB of 100-byte lines, each stamped with the time it
was printed, then ``FLOOD DONE``; this process reads the piped output as a terminal
would. Reported (medians over the runs, and the worst): the launcher's peak RSS and
its growth over the RSS it had once every node was up, the lag of the relayed lines
(time shown minus time printed; largest of a run), how much the relay said it skipped,
how long the node took to print, and the time from Ctrl-C to the launcher's exit.

Run:  ``.venv/bin/python bench/flood_bench.py [--mb 100] [--runs 3] [--backends procs,threads]``.
Writes bench/results/flood.json and bench/results/flood.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
GRACE_S = 5.0
SKIPPED = re.compile(r"\[\w+: ([\d.]+) (GB|MB|kB|bytes) of output skipped")
UNITS = {"GB": 1e9, "MB": 1e6, "kB": 1e3, "bytes": 1.0}


class Flood:
    """The node: ``mb`` MB of lines ``<time> <n> xxx...`` (100 bytes), then FLOOD DONE."""

    def __init__(self, mb: float = 100.0) -> None:
        self.lines = int(mb * 1e6 / 100)

    def run(self) -> None:
        import topo

        stop = topo.stop_event()
        pad = "x" * 68
        t0 = time.time()
        for i in range(self.lines):
            print(f"{time.time():.3f} {i:012d} {pad}")
            if i % 4096 == 0 and stop.is_set():
                break
        print(f"FLOOD DONE {time.time():.3f} {time.time() - t0:.2f}", flush=True)
        topo.wait_for_stop()


def one_run(backend: str, mb: float, workdir: Path) -> dict[str, Any]:
    """One ``topo run`` of the flood node; its measures."""
    topology = workdir / "flood.yaml"
    topology.write_text(
        f'name: flood\nnodes:\n  learner: {{target: "flood_bench:Flood", args: {{mb: {mb}}}}}\n'
    )
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]),
        NO_COLOR="1",
        COLUMNS="200",
    )
    cmd = [sys.executable, "-c", "from topo.cli import main; main()", "run", str(topology)]
    cmd += ["-b", backend, "--no-live", "--grace", str(GRACE_S)]
    cmd += ["--log-dir", str(workdir / "runs")]
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=workdir
    )
    assert proc.stdout is not None
    state: dict[str, Any] = {"up": None, "done": None, "lag": 0.0, "skipped": 0.0, "lines": 0}

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            now = time.time()
            line = raw.decode("utf-8", "replace")
            _, _, text = line.partition(" | ")
            if state["up"] is None and " up in " in line:
                state["up"] = time.monotonic()
            if (m := SKIPPED.search(text)) is not None:
                state["skipped"] += float(m.group(1)) * UNITS[m.group(2)]
            elif text.startswith("FLOOD DONE"):
                printed, took = (float(x) for x in text.split()[2:4])
                state["lag"] = max(state["lag"], now - printed)
                state["done"], state["print_s"] = time.monotonic(), took
            elif text[:1].isdigit():
                state["lines"] += 1
                state["lag"] = max(state["lag"], now - float(text.split()[0]))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    launcher = psutil.Process(proc.pid)
    base = peak = 0
    end = time.monotonic() + 600
    while state["done"] is None and proc.poll() is None and time.monotonic() < end:
        rss = launcher.memory_info().rss
        if state["up"] is not None and not base:
            base = rss
        peak = max(peak, rss)
        time.sleep(0.05)
    try:
        cpu = launcher.cpu_times()
        cpu_s = round(cpu.user + cpu.system, 2)
    except psutil.NoSuchProcess:
        cpu_s = None
    t0 = time.monotonic()
    proc.send_signal(signal.SIGINT)
    while proc.poll() is None:
        try:
            peak = max(peak, launcher.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    stopped = time.monotonic() - t0
    reader.join(30)
    return {
        "peak_rss_mib": round(peak / 2**20, 1),
        "rss_growth_mib": round((peak - base) / 2**20, 1),
        "max_lag_s": round(state["lag"], 2),
        "skipped_mb": round(state["skipped"] / 1e6, 1),
        "lines_shown": state["lines"],
        "print_s": state.get("print_s"),
        "ctrl_c_s": round(stopped, 2),
        "launcher_cpu_s": cpu_s,
        "exit_code": proc.returncode,
    }


def _median(rows: list[dict[str, Any]], key: str) -> float:
    return round(statistics.median(r[key] for r in rows if r[key] is not None), 2)


def _worst(rows: list[dict[str, Any]], key: str) -> float:
    return round(max(r[key] for r in rows if r[key] is not None), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=100.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--backends", default="procs,threads")
    parser.add_argument(
        "--before", type=Path, help="a flood.json of the code before a change: shown beside"
    )
    args = parser.parse_args()
    results: dict[str, Any] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "mb": args.mb,
        "runs": args.runs,
        "grace_s": GRACE_S,
        "backends": {},
    }
    for backend in args.backends.split(","):
        rows = []
        for i in range(args.runs):
            with tempfile.TemporaryDirectory(prefix="topo-flood-") as tmp:
                row = one_run(backend, args.mb, Path(tmp))
            print(backend, i + 1, row, flush=True)
            rows.append(row)
        results["backends"][backend] = rows
    if args.before is not None:  # columns "<backend> before" beside each backend's
        before = json.loads(args.before.read_text())["backends"]
        merged = {}
        for backend, rows in results["backends"].items():
            if backend in before:
                merged[f"{backend} before"] = before[backend]
            merged[backend] = rows
        results["backends"] = merged
        results["before"] = str(args.before)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "flood.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "flood.md").write_text(report(results))
    print(report(results))


MEASURES = (
    ("launcher peak RSS (MiB)", "peak_rss_mib"),
    ("launcher RSS growth after start (MiB)", "rss_growth_mib"),
    ("largest lag of a relayed line (s)", "max_lag_s"),
    ("output said skipped (MB)", "skipped_mb"),
    ("lines shown", "lines_shown"),
    ("node's time to print it all (s)", "print_s"),
    ("Ctrl-C → launcher exited (s)", "ctrl_c_s"),
    ("launcher's CPU until the last line (s; on threads the node's too)", "launcher_cpu_s"),
)


def report(results: dict[str, Any]) -> str:
    """The results as a markdown page."""
    backends = list(results["backends"])
    out = [
        "# Flood benchmark",
        "",
        f"`.venv/bin/python bench/flood_bench.py --mb {results['mb']:g} --runs "
        f"{results['runs']}` — Python {results['python']}, {results['cpus']} CPUs "
        "(shared, noisy).",
        "",
        f"One node prints {results['mb']:g} MB of 100-byte lines as fast as it can, each "
        "stamped with the time it was printed; `topo run --no-live` is piped and read "
        "as a terminal would. Ctrl-C as soon as the node's last line is shown (grace "
        f"{results['grace_s']:g} s). Medians of {results['runs']} runs (largest in "
        "brackets).",
        "",
        "Before the relay was bounded (issue 24, a node printing 100 MB on the "
        "previous code): the launcher fell 100–135 s behind, grew to 230–312 MiB and "
        "Ctrl-C took 99 s (92 s after a second Ctrl-C).",
        "",
        *(
            [
                'Columns "before": the previous code, measured in the same session '
                f"({results['before']})."
            ]
            if results.get("before")
            else []
        ),
        "",
        "| measure | " + " | ".join(backends) + " |",
        "| --- |" + " ---: |" * len(backends),
    ]
    for name, key in MEASURES:
        cells = []
        for b in backends:
            rows = results["backends"][b]
            cells.append(f"{_median(rows, key):g} ({_worst(rows, key):g})")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    codes = {b: sorted({r["exit_code"] for r in rows}) for b, rows in results["backends"].items()}
    out += ["", f"Exit codes: {codes}.", ""]
    return "\n".join(out)


if __name__ == "__main__":
    main()
