"""The events tab in a real browser (Playwright, Debian's Chromium) on a run directory
kept live by the test as a launcher keeps one: new events go on top of the list without
drawing it again, the list holds the newest 2,000, its filters work, and a stream that
reconnects starts the page's events over instead of doubling them."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

from tests.ui.chromium import CHROMIUM, LOAD_S
from tests.ui.support import TOKEN, make_run_dir, serving

pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}")

EARLIER = 2500  # events in the run directory before the page opens


def live_run_dir(path: Path) -> Path:
    """A running run's directory (no launcher to look for) with EARLIER busy events."""
    run_dir = make_run_dir(path, state="running")
    status = json.loads((run_dir / "status.json").read_text())
    status["launcher"] = {}
    (run_dir / "status.json").write_text(json.dumps(status))
    with open(run_dir / "events.jsonl", "a") as f:
        for i in range(EARLIER):
            row = {"time": time.time() - 600 + i * 0.1, "kind": "busy", "node": f"producer/{i % 4}"}
            f.write(json.dumps({**row, "message": f"busy {i}", "busy": True}) + "\n")
    return run_dir


def append(run_dir: Path, kind: str, message: str) -> None:
    row = {"time": time.time(), "kind": kind, "node": "producer/1", "message": message}
    with open(run_dir / "events.jsonl", "a") as f:
        f.write(json.dumps(row) + "\n")


def first_rows(page: Any, n: int) -> list[str]:
    found: list[str] = page.evaluate(
        "(n) => [...document.querySelectorAll('#event-list li')].slice(0, n)"
        ".map((li) => li.textContent)",
        n,
    )
    return found


@pytest.mark.slow
def test_new_events_go_on_top_and_a_reconnected_stream_does_not_double_them(
    browser: Any, tmp_path: Path
) -> None:
    run_dir = live_run_dir(tmp_path / "run")
    total = EARLIER + 2  # make_run_dir's own two
    with serving(run_dir) as dashboard:
        port = dashboard.server_address[1]
        page = browser.new_page()
        page.goto(f"http://127.0.0.1:{port}/?token={TOKEN}")
        page.wait_for_selector("body[data-ready='1']")
        page.wait_for_function("(n) => Topo.events.length === n", arg=total)
        page.click("#tabs [data-tab=events]")
        page.wait_for_function("() => document.querySelectorAll('#event-list li').length === 2000")
        assert "busy 2499" in first_rows(page, 1)[0]  # the newest first
        # a row drawn now: still the same element once new events are in
        page.evaluate("() => { document.querySelector('#event-list li').dataset.mark = '1'; }")
        for i in range(3):
            append(run_dir, "stalled", f"new {i}")
        total += 3
        page.wait_for_function("(n) => Topo.events.length === n", arg=total)
        page.wait_for_function(
            "() => document.querySelector('#event-list li').textContent.includes('new 2')",
            timeout=LOAD_S * 1000,
        )
        top = first_rows(page, 4)
        assert ["new 2" in top[0], "new 1" in top[1], "new 0" in top[2]] == [True] * 3
        assert "busy 2499" in top[3]
        assert page.locator("#event-list li[data-mark='1']").count() == 1, "the list was redrawn"
        assert page.locator("#event-list li").count() == 2000  # the oldest shown went
        # the filters draw the list again, and only what they let through
        page.fill("#event-filter", "new 1")
        page.wait_for_function("() => document.querySelectorAll('#event-list li').length === 1")
        page.select_option("#event-kind", "life")
        page.wait_for_function("() => document.querySelectorAll('#event-list li').length === 0")
        page.fill("#event-filter", "")
        page.select_option("#event-kind", "")
        page.wait_for_function("() => document.querySelectorAll('#event-list li').length === 2000")
    # The dashboard goes away and comes back on the same port: the page's stream
    # reconnects by itself and is sent every event again.
    with serving(run_dir, port=port):
        append(run_dir, "stalled", "after the reconnection")
        total += 1
        page.wait_for_function(
            "() => document.querySelector('#event-list li').textContent.includes('after the')",
            timeout=LOAD_S * 1000,
        )
        assert page.evaluate("() => Topo.events.length") == total  # not twice as many
        assert page.locator("#event-list li", has_text="new 2").count() == 1
        assert page.text_content("#events-count") == str(total)
        page.close()
