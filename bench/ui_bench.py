"""Dashboard benchmark: page load and update latency at 10, 100 and 300 nodes, and the
launcher's (and nodes') CPU with the page open against the page closed, in one run.

Each size runs ``topo run --ui`` on procs with cheap courier nodes (``bench/ui_nodes.py``:
each prints a line, writes a metric row and calls the hub every second; 30 nodes per
process), and drives Debian's Chromium with Playwright:

* **page load**: from ``page.goto(URL)`` until the page is ready (the run, the drawing
  coloured by state, every node's state known); the first load (the dashboard draws the
  program) and the median of 5 reloads;
* **update latency**: a node restarted over the control channel; from the launcher's
  own ``restarting`` event (its time in ``events.jsonl``) until the page shows the
  restart; 5 times, median and worst;
* **CPU** (the largest size): the launcher's and the node processes' CPU time over
  windows of ``--window`` seconds, alternately with no page open and with a page open
  (graph, a node's panel following its log, curves fetched every 2 s); medians of the
  windows and their ratio (page open / closed). The dashboard's own process is shown
  apart: it is not the launcher.

Run: ``.venv/bin/python bench/ui_bench.py [--sizes 10,100,300] [--window 15] [--pairs 3]``.
Writes bench/results/ui.json and bench/results/ui.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"

from tests.ui.chromium import ARGS, CHROMIUM  # noqa: E402  (ROOT on the path first)

READY_JS = "() => document.body.dataset.ready === '1' && Object.keys(Topo.nodes).length > 0"


def topology(path: Path, nodes: int) -> Path:
    """``nodes`` nodes: a hub and ``nodes - 1`` workers calling it, 30 per process."""
    path.write_text(
        textwrap.dedent(
            f"""\
            name: ui_bench_{nodes}
            nodes:
              hub:
                target: bench.ui_nodes:Worker
              worker:
                target: bench.ui_nodes:Worker
                count: {nodes - 1}
                colocate: {{per_process: 30}}
                args: {{index: "${{replica}}", peer: "@hub"}}
            """
        )
    )
    return path


def env(home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "TOPO_HOME": str(home), "NO_COLOR": "1"}


class Run:
    """One ``topo run --ui`` of the bench topology."""

    def __init__(self, work: Path, nodes: int) -> None:
        path = topology(work / f"ui_{nodes}.yaml", nodes)
        argv = [sys.executable, "-m", "topo", "run", str(path), "--ui", "--no-live", "-q"]
        self.proc = subprocess.Popen(
            [*argv, "--log-dir", str(work / "runs")],
            cwd=ROOT,
            env=env(work),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        self.url = ""
        for line in self.proc.stderr:
            if line.startswith("dashboard: "):
                self.url = line.split()[1]
                break
        if not self.url:
            raise SystemExit("topo run --ui printed no URL")
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()
        self.run_dir = max((work / "runs").glob(f"ui_bench_{nodes}-*"), key=os.path.getmtime)
        self.nodes = nodes

    def status(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((self.run_dir / "status.json").read_text())
        return data

    def wait_running(self, timeout: float = 600) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                nodes = self.status()["nodes"]
            except (OSError, ValueError):
                nodes = []
            if nodes and all(n["state"] == "running" for n in nodes):
                return
            time.sleep(0.2)
        raise SystemExit(f"{self.nodes} nodes did not come up")

    def processes(self) -> tuple[psutil.Process, list[psutil.Process], list[psutil.Process]]:
        """(the launcher, the node processes, the dashboard's process)."""
        launcher = psutil.Process(int(self.status()["launcher"]["pid"]))
        below = launcher.children(recursive=True)
        title = f"topo: ui {self.run_dir.name}"  # the dashboard's process title
        ui = [p for p in below if " ".join(p.cmdline()).strip() == title]
        pids = {int(n["pid"]) for n in self.status()["nodes"] if n.get("pid")}
        nodes = [p for p in below if p.pid in pids]
        return launcher, nodes, ui

    def restart(self, node: str) -> None:
        from topo.runs.control import request

        answer = request(self.run_dir, self.status()["control"], {"op": "restart", "node": node})
        assert answer.get("ok"), answer

    def event_time(self, node: str, after: float) -> float:
        """The time of the first ``restarting`` event of ``node``'s executable (its
        process, with the nodes it shares) after ``after``."""
        exe = {n["id"]: n for n in self.status()["nodes"]}[node]["executable"]
        end = time.monotonic() + 60
        while time.monotonic() < end:
            for line in (self.run_dir / "events.jsonl").read_text().splitlines():
                e = json.loads(line)
                if e["kind"] == "restarting" and e.get("executable") == exe and e["time"] > after:
                    return float(e["time"])
            time.sleep(0.02)
        raise SystemExit(f"no restarting event for {node}")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            pass
    return total


def page_load(browser: Any, url: str, reloads: int) -> tuple[float, list[float]]:
    page = browser.new_page()
    t0 = time.perf_counter()
    page.goto(url)
    page.wait_for_function(READY_JS, timeout=120_000)
    first = time.perf_counter() - t0
    warm = []
    for _ in range(reloads):
        t0 = time.perf_counter()
        page.goto(url)
        page.wait_for_function(READY_JS, timeout=120_000)
        warm.append(time.perf_counter() - t0)
    page.close()
    return first, warm


def update_latency(browser: Any, run: Run, times: int) -> list[float]:
    page = browser.new_page()
    page.goto(run.url)
    page.wait_for_function(READY_JS, timeout=120_000)
    out = []
    for i in range(times):
        node = f"worker/{(i * 37) % (run.nodes - 1)}"
        before = page.evaluate("(id) => Topo.nodes[id].restarts", node)
        asked = time.time()
        run.restart(node)
        page.wait_for_function(
            "([id, n]) => Topo.nodes[id].restarts > n", arg=[node, before], timeout=60_000
        )
        seen = time.time()
        out.append(seen - run.event_time(node, asked))
        run.wait_running()
    page.close()
    return out


def cpu_windows(browser: Any, run: Run, window: float, pairs: int) -> dict[str, Any]:
    launcher, nodes, ui = run.processes()
    rows: dict[str, list[float]] = {k: [] for k in ("closed", "open")}
    node_rows: dict[str, list[float]] = {k: [] for k in ("closed", "open")}
    ui_rows: dict[str, list[float]] = {k: [] for k in ("closed", "open")}
    for _ in range(pairs):
        for mode in ("closed", "open"):
            page = None
            if mode == "open":
                page = browser.new_page()
                page.goto(run.url)
                page.wait_for_function(READY_JS, timeout=120_000)
                page.click("#graph g.node[data-key='hub']")  # its panel follows its log
            time.sleep(1.0)
            a, n, u = cpu_s([launcher]), cpu_s(nodes), cpu_s(ui)
            time.sleep(window)
            rows[mode].append((cpu_s([launcher]) - a) / window)
            node_rows[mode].append((cpu_s(nodes) - n) / window)
            ui_rows[mode].append((cpu_s(ui) - u) / window)
            if page is not None:
                page.close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    nmed = {k: statistics.median(v) for k, v in node_rows.items()}
    return {
        "window_s": window,
        "pairs": pairs,
        "launcher_cores": rows,
        "nodes_cores": node_rows,
        "dashboard_cores": ui_rows,
        "launcher_median": med,
        "nodes_median": nmed,
        "dashboard_median": {k: statistics.median(v) for k, v in ui_rows.items()},
        "launcher_ratio": med["open"] / med["closed"] if med["closed"] else None,
        "nodes_ratio": nmed["open"] / nmed["closed"] if nmed["closed"] else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,100,300")
    parser.add_argument("--window", type=float, default=15.0)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--reloads", type=int, default=5)
    parser.add_argument("--updates", type=int, default=5)
    opts = parser.parse_args()
    from playwright.sync_api import sync_playwright

    sizes = [int(s) for s in opts.sizes.split(",")]
    results: dict[str, Any] = {
        "machine": f"{platform.node()} ({os.cpu_count()} CPUs)",
        "load_at_start": os.getloadavg()[0],
        "sizes": {},
    }
    with tempfile.TemporaryDirectory(prefix="ui-bench-") as tmp, sync_playwright() as p:
        work = Path(tmp)
        browser = p.chromium.launch_persistent_context(
            str(work / "chromium"),
            executable_path=CHROMIUM,
            args=ARGS,
            headless=True,
            viewport={"width": 1400, "height": 900},
        )
        for n in sizes:
            run = Run(work, n)
            try:
                run.wait_running()
                time.sleep(3)  # start-up work over
                first, warm = page_load(browser, run.url, opts.reloads)
                updates = update_latency(browser, run, opts.updates)
                row: dict[str, Any] = {
                    "first_load_s": first,
                    "loads_s": warm,
                    "load_median_s": statistics.median(warm),
                    "updates_s": updates,
                    "update_median_s": statistics.median(updates),
                    "update_max_s": max(updates),
                }
                if n == max(sizes):
                    row["cpu"] = cpu_windows(browser, run, opts.window, opts.pairs)
                results["sizes"][str(n)] = row
                print(f"{n} nodes: {json.dumps(row)[:300]}", flush=True)
            finally:
                run.stop()
        browser.close()
    results["load_at_end"] = os.getloadavg()[0]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "ui.json").write_text(json.dumps(results, indent=2) + "\n")
    (RESULTS / "ui.md").write_text(report(results))
    print(report(results))


def report(r: dict[str, Any]) -> str:
    sizes = r["sizes"]
    base = sizes[min(sizes, key=int)]
    lines = [
        "# Dashboard benchmark",
        "",
        f"One run on {r['machine']}, shared and noisy (load average {r['load_at_start']:.1f} at "
        f"the start, {r['load_at_end']:.1f} at the end). procs backend, cheap courier nodes "
        "(`bench/ui_nodes.py`: a line, a metric row and a call to the hub every second each, "
        "30 nodes per process); Chromium driven by Playwright. Ratios are against the smallest "
        "program of the same run.",
        "",
        "| nodes | first load s | load s (median of reloads) | ratio | update s (median) | "
        "update s (worst) | ratio |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for n, row in sizes.items():
        lines.append(
            f"| {n} | {row['first_load_s']:.2f} | {row['load_median_s']:.2f} | "
            f"{row['load_median_s'] / base['load_median_s']:.2f}× | "
            f"{row['update_median_s']:.2f} | {row['update_max_s']:.2f} | "
            f"{row['update_median_s'] / base['update_median_s']:.2f}× |"
        )
    big = max(sizes, key=int)
    cpu = sizes[big].get("cpu")
    if cpu:
        lm, nm, um = cpu["launcher_median"], cpu["nodes_median"], cpu["dashboard_median"]
        lines += [
            "",
            f"CPU at {big} nodes, share of one core, medians of {cpu['pairs']} windows of "
            f"{cpu['window_s']:g} s each way, page closed and open in turn:",
            "",
            "| process | page closed | page open | ratio |",
            "|---|---:|---:|---:|",
            f"| launcher | {lm['closed']:.3f} | {lm['open']:.3f} | {cpu['launcher_ratio']:.2f}× |",
            f"| nodes (all) | {nm['closed']:.3f} | {nm['open']:.3f} | {cpu['nodes_ratio']:.2f}× |",
            f"| dashboard (its own process) | {um['closed']:.3f} | {um['open']:.3f} | |",
        ]
    lines += [
        "",
        "Goals (issue 31): with 300 nodes the page loads in ≤ 1 s and a state change shows "
        "in ≤ 1 s; the launcher and the nodes do not slow down with the page open.",
        "",
        "Rerun: `.venv/bin/python bench/ui_bench.py`",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
