"""A run lost while its dashboard is open, in a real browser (Playwright, Debian's
Chromium): its launcher killed with SIGKILL, the page says "run lost" in red instead of
"2/2 nodes running", every node reads lost (no uptime), and the run's clock stopped at
the launcher's last record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli.operate import env, run_detached, run_pids, status, ticker_topology
from tests.ui.chromium import CHROMIUM, LOAD_S
from topo.testing import wait_gone

pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}")


@pytest.mark.slow
def test_the_page_of_a_run_that_gets_lost_says_so(browser: Any, tmp_path: Path) -> None:
    file = ticker_topology(tmp_path / "tickers.yaml", count=2)
    run_id, run_dir = run_detached(tmp_path, str(file), "-b", "procs")
    pids = run_pids(run_dir)
    ui = subprocess.Popen(
        [sys.executable, "-m", "topo", "ui", run_id],
        cwd=tmp_path,
        env=env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert ui.stdout is not None
        url = ui.stdout.readline().strip()
        page = browser.new_page()
        page.goto(url)
        page.wait_for_selector("body[data-state='running']")
        page.wait_for_function(
            "document.querySelector('#run-facts').textContent.includes('2/2 nodes running')"
        )

        launcher = int(status(run_dir)["launcher"]["pid"])
        os.kill(launcher, signal.SIGKILL)
        assert not wait_gone(pids, 20)
        page.wait_for_selector("body[data-state='lost']", timeout=LOAD_S * 1000)
        drawn = "document.querySelector('#run-facts').textContent.includes('run lost')"
        page.wait_for_function(drawn, timeout=LOAD_S * 1000)  # (at the next frame)
        facts = page.inner_text("#run-facts")
        assert f"run lost: its launcher (pid {launcher}) ended without ending the run" in facts
        assert "nodes running" not in facts and f"topo stop {run_id} cleans up" in facts
        assert "st-lost" in (page.get_attribute("#run-state", "class") or "")
        # a node seen still running as its launcher died reads "orphaned" until the
        # page's next look at it (each second)
        all_lost = "Object.values(Topo.nodes).every((n) => n.state === 'lost')"
        page.wait_for_function(all_lost, timeout=LOAD_S * 1000)
        states = page.evaluate("Object.values(Topo.nodes).map((n) => n.state)")
        assert states == ["lost", "lost"]
        page.click("nav button[data-tab='nodes']")
        page.wait_for_selector("#node-table tbody td.st-lost", timeout=LOAD_S * 1000)
        cells = page.eval_on_selector_all(
            "#node-table tbody tr",
            "(rows) => rows.map((r) => [...r.cells].map((c) => c.className + ':' + c.textContent))",
        )
        assert all("st-lost:lost" in row for row in cells), cells
        assert all(row[5] == ":" for row in cells), cells  # the uptime cell is empty
        # the run's clock stopped at its launcher's last record
        stopped = page.evaluate("Topo.duration(Topo.run.updated - Topo.run.started)")
        assert f" · up {stopped}" in page.inner_text("#run-facts")
    finally:
        ui.send_signal(signal.SIGINT)
        ui.communicate(timeout=30)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
