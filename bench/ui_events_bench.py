"""Dashboard benchmark: what the page's main thread spends while a run's events are
listed. A long run collects thousands of events (a busy group flags and clears itself
again and again); the page used to draw its whole events list again at every status
message (twice a second), and its node panel's history likewise.

A run directory (a real compiled program's ``program.json``) is kept live by this
script as a launcher keeps one: ``status.json`` rewritten twice a second (one node's
metrics change), one event appended to ``events.jsonl`` a second, N events there at the
start. The real dashboard serves it; Debian's Chromium (Playwright) shows it, a node's
panel open. The main thread's busy time (Chrome's ``TaskDuration``, over the DevTools
protocol) is measured over windows with the graph tab shown and with the events tab
shown, in turn: the graph tab is the baseline of the same run. Also: how long the click
that shows the events tab takes until the list is drawn.

Run: ``.venv/bin/python bench/ui_events_bench.py [--sizes 100,1000,5000] [--window 8]
[--pairs 3] [--name ui_events]``. Writes bench/results/NAME.json and NAME.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"

from tests.ui.chromium import ARGS, CHROMIUM  # noqa: E402  (ROOT on the path first)
from tests.ui.support import TOKEN, make_run_dir, serving  # noqa: E402


def event(i: int) -> dict[str, Any]:
    """The kind of event a long busy run is made of: producers flagged busy and clear."""
    node = f"producer/{i % 9}"
    busy = i % 2 == 0
    message = (
        f"node {node} answers no calls: all 8 handler threads busy for 5s (in work ×8)"
        if busy
        else f"node {node} answers calls again"
    )
    return {
        "time": time.time() - 3600 + i * 0.5,
        "kind": "busy",
        "node": node,
        "executable": node,
        "pid": 1000 + i % 9,
        "message": message,
        "busy": busy,
    }


class LiveRun:
    """A run directory kept changing as a launcher changes one, until ``stop``."""

    def __init__(self, path: Path, events: int) -> None:
        self.path = make_run_dir(path, state="running")
        status = json.loads((self.path / "status.json").read_text())
        status["launcher"] = {}  # no launcher to look for: the run stays "running"
        self.status = status
        with open(self.path / "events.jsonl", "a") as f:
            f.writelines(json.dumps(event(i)) + "\n" for i in range(events))
        self.count = events
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._keep_changing, daemon=True)

    def _keep_changing(self) -> None:
        tick = 0
        while not self.stopping.wait(0.5):
            tick += 1
            self.status["nodes"][0]["metrics"] = {"done": tick}
            tmp = self.path / "status.json.tmp"
            tmp.write_text(json.dumps(self.status))
            os.replace(tmp, self.path / "status.json")
            if tick % 2 == 0:
                with open(self.path / "events.jsonl", "a") as f:
                    f.write(json.dumps(event(self.count)) + "\n")
                self.count += 1

    def __enter__(self) -> LiveRun:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stopping.set()
        self.thread.join(5)


def task_s(cdp: Any) -> float:
    """The page's main-thread busy time so far (s)."""
    metrics = cdp.send("Performance.getMetrics")["metrics"]
    return float(next(m["value"] for m in metrics if m["name"] == "TaskDuration"))


def measure(browser: Any, n: int, window: float, pairs: int) -> dict[str, Any]:
    with (
        tempfile.TemporaryDirectory() as tmp,
        LiveRun(Path(tmp) / "run", n),
        serving(Path(tmp) / "run") as dashboard,
    ):
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        cdp = page.context.new_cdp_session(page)
        cdp.send("Performance.enable")
        page.goto(f"http://127.0.0.1:{dashboard.server_address[1]}/?token={TOKEN}")
        page.wait_for_selector("body[data-ready='1']")
        page.wait_for_function("(n) => Topo.events.length >= n", arg=n)
        page.click("#tabs [data-tab=nodes]")
        page.click("#node-table tr[data-node='producer/3']")  # its panel: its history
        page.wait_for_selector("#panel-history .item")
        busy: dict[str, list[float]] = {"graph": [], "events": []}
        draw_ms: list[float] = []
        for _ in range(pairs):
            for tab in ("graph", "events"):
                t0 = time.perf_counter()
                page.click(f"#tabs [data-tab={tab}]")
                if tab == "events":
                    page.wait_for_selector("#event-list li")
                    draw_ms.append(1000 * (time.perf_counter() - t0))
                time.sleep(1.0)  # the switch itself is not in the window
                c0, w0 = task_s(cdp), time.perf_counter()
                time.sleep(window)
                busy[tab].append((task_s(cdp) - c0) / (time.perf_counter() - w0))
        rows = page.locator("#event-list li").count()
        page.close()
    med = {tab: statistics.median(v) for tab, v in busy.items()}
    return {
        "events": n,
        "rows_listed": rows,
        "busy_share": busy,
        "median_busy_share": med,
        "ratio_events_to_graph": med["events"] / med["graph"] if med["graph"] else None,
        "show_events_ms": draw_ms,
        "median_show_events_ms": statistics.median(draw_ms),
    }


def report(results: list[dict[str, Any]], meta: dict[str, Any], a: argparse.Namespace) -> str:
    rows = [
        f"| {r['events']:,} | {r['rows_listed']:,} | {100 * r['median_busy_share']['graph']:.1f} % "
        f"| {100 * r['median_busy_share']['events']:.1f} % | {r['ratio_events_to_graph']:.2f}× "
        f"| {r['median_show_events_ms']:.0f} |"
        for r in results
    ]
    return "\n".join(
        [
            "# Dashboard: the events tab",
            "",
            f"One run on {meta['cpus']} CPUs, load average {meta['load_avg_start']:.1f} → "
            f"{meta['load_avg_end']:.1f}; commit {meta['commit']}. A live run directory "
            "(status twice a second, an event a second, N events at the start), the real "
            "dashboard, Chromium with a node's panel open. The page's main-thread busy "
            f"time (Chrome's TaskDuration) as a share of wall time: medians of {a.pairs} "
            f"windows of {a.window:g} s per tab, the tabs in turn.",
            "",
            "| events | rows listed | busy, graph tab | busy, events tab | ratio | "
            "show the events tab, ms (median) |",
            "|---:|---:|---:|---:|---:|---:|",
            *rows,
            "",
            f"Rerun: `.venv/bin/python bench/ui_events_bench.py --name {a.name}`",
            "",
        ]
    )


def main() -> None:
    import subprocess

    from playwright.sync_api import sync_playwright

    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,1000,5000")
    ap.add_argument("--window", type=float, default=8.0)
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--name", default="ui_events")
    a = ap.parse_args()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    load0 = os.getloadavg()[0]
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            results = [measure(browser, int(n), a.window, a.pairs) for n in a.sizes.split(",")]
        finally:
            browser.close()
    meta = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "commit": commit,
        "load_avg_start": load0,
        "load_avg_end": os.getloadavg()[0],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{a.name}.json").write_text(
        json.dumps({"meta": meta, "results": results}, indent=2) + "\n"
    )
    text = report(results, meta, a)
    (RESULTS / f"{a.name}.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
