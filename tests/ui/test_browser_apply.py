"""The dashboard follows ``topo apply`` in a real browser (Playwright, Debian's Chromium): a
page opened before a change draws the new program's graph while it stays open and after
a reload, and drops the nodes the change removed."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli.operate import run_pids, topo
from tests.ui.chromium import CHROMIUM, LOAD_S
from tests.ui.support import end_all, start_with_ui
from topo.testing import wait_gone

pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}"),
]

TICKERS = """\
name: tickers
params:
  extra: {default: false}
nodes:
  ticker:
    target: tests.cli.ticker:Ticker
    count: 2
    args: {name: t, every: 0.5}
  extra:
    target: tests.cli.ticker:Ticker
    enabled: ${extra}
    args: {name: x, every: 0.5}
"""
BOX = "(key) => !!document.querySelector(`#graph g.node[data-key='${key}']`)"
NO_BOX = "(key) => !document.querySelector(`#graph g.node[data-key='${key}']`)"


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    end_all(procs)


def wait_js(page: Any, expression: str, arg: Any = None) -> None:
    page.wait_for_function(expression, arg=arg, timeout=LOAD_S * 1000)


def test_a_page_open_before_a_change_draws_the_changed_program(
    browser: Any, tmp_path: Path, started: list[subprocess.Popen[str]]
) -> None:
    file = tmp_path / "tickers.yaml"
    file.write_text(TICKERS)
    proc, url, ui_pid, run_dir = start_with_ui(tmp_path, [str(file), "-b", "procs"], started)
    pids = run_pids(run_dir) | {ui_pid}
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")
    wait_js(page, BOX, "ticker/1")
    assert page.evaluate(NO_BOX, "extra")

    added = topo("apply", str(run_dir), str(file), "-p", "extra=true", cwd=tmp_path)
    assert added.returncode == 0, added.stdout + added.stderr
    pids |= run_pids(run_dir)
    wait_js(page, BOX, "extra")  # drawn again while the page is open
    wait_js(page, "() => document.querySelector('#graph').dataset.generation === '1'")
    page.reload()
    page.wait_for_selector("body[data-ready='1']")
    wait_js(page, BOX, "extra")  # and after a reload
    wait_js(page, "() => Topo.nodes['extra'] && Topo.nodes['extra'].state === 'running'")

    removed = topo("apply", str(run_dir), str(file), "-p", "extra=false", cwd=tmp_path)
    assert removed.returncode == 0, removed.stdout + removed.stderr
    wait_js(page, NO_BOX, "extra")
    wait_js(page, "() => !('extra' in Topo.nodes) && Object.keys(Topo.nodes).length === 2")
    page.click("#tabs [data-tab=nodes]")
    wait_js(page, "() => document.querySelectorAll('#node-table tbody tr').length === 2")
    assert errors == []

    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#act-stop")
    page.wait_for_selector("body[data-state='ended']")
    assert proc.wait(120) == 0
    assert not wait_gone(pids, 30)
