"""The dashboard in a real browser: Playwright driving Debian's Chromium (``apt-get
install chromium``, which ``./dev test`` does) on the pages of running programs started
with ``topo run --ui``, as a user sees them.

consumer_producers: the nodes and their states, a collapsed group expanded, a producer
killed (``os.kill``) and seen restarting on the page, actions refused without a
confirmation, a wrong or missing token refused, the program stopped from the page.
acme_distributed (a small DQN budget): every node running, a learning curve growing, a
log followed, an actor killed and seen restarting. Screenshots go to the test's
tmp_path (``TOPO_DASHBOARD_PNG=docs/dashboard.png`` also writes the README's one). Each
test checks by pid that the run, its nodes and the dashboard are gone at the end.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.cli.operate import run_pids, status
from tests.ui.chromium import CHROMIUM, LOAD_S
from tests.ui.support import end_all, start_with_ui
from topo.testing import wait_gone, wait_until

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "topologies"
UP = ("running", "busy")  # busy: running, with every handler thread serving a call
# the collapsed group of 9: up, and its counts (e.g. "8 running, 1 busy") summing to 9
UP_9 = """(up) => {
  const box = document.querySelector('#graph g.node.collapsed');
  if (!box || !up.includes(box.dataset.state)) return false;
  let n = 0;
  for (const part of (box.dataset.counts || '').split(', ')) {
    const m = part.match(/^(\\d+) (\\w+)$/);
    if (!m || !up.includes(m[2])) return false;
    n += Number(m[1]);
  }
  return n === 9;
}"""
BOX = "((key) => document.querySelector(`#graph g.node[data-key='${key}']`))"
# the page's copy of a node: restarted at least n times and running again
RESTARTED = "([id, n]) => Topo.nodes[id].restarts >= n && Topo.nodes[id].state === 'running'"

playwright_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM}"),
]


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []
    yield procs
    end_all(procs)


def open_page(browser: Any, url: str) -> Any:
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.errors = errors
    page.goto(url)
    page.wait_for_selector("body[data-ready='1']")
    return page


def node(page: Any, node_id: str) -> dict[str, Any]:
    """The page's own copy of a node's status (what it draws from)."""
    found: dict[str, Any] = page.evaluate("(id) => window.Topo.nodes[id]", node_id)
    return found


def wait_js(page: Any, expression: str, arg: Any = None, timeout: float = LOAD_S) -> None:
    page.wait_for_function(expression, arg=arg, timeout=timeout * 1000)


def pid_of(run_dir: Path, node_id: str) -> int:
    return int({n["id"]: n for n in status(run_dir)["nodes"]}[node_id]["pid"])


def renice(pid: int, niceness: int) -> None:
    """Set the niceness of every thread of ``pid`` (Linux's setpriority on a pid sets only
    its main thread's; threads it starts later inherit from the thread starting them), and
    of its scheduling group where Linux has autogroups.

    A thread's niceness counts only inside its autogroup (its session: here the fork
    server's, the whole program's), and each group competes as one whole: with the
    program's group at niceness 0, a busy loop outside it got 5-30 % of a core beside the
    nine hashing producers (kernel 6.18), and the browser, the dashboard and this test
    crawled; with the group at 19 the loop got all of one. ``nice topo run`` does this for
    a whole program (``topo.backends.proctree.keep_niceness``)."""
    with contextlib.suppress(OSError):
        Path(f"/proc/{pid}/autogroup").write_text(str(niceness))
    with contextlib.suppress(psutil.NoSuchProcess):
        for thread in psutil.Process(pid).threads():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.setpriority(os.PRIO_PROCESS, thread.id, niceness)


@contextlib.contextmanager
def niced(run_dir: Path, prefix: str, niceness: int) -> Iterator[set[int]]:
    """Every thread of every node whose id starts with ``prefix`` kept at ``niceness``
    while in the block, a restarted node's new process too, once it runs (looked for twice
    a second: niced while it starts, it would start last of all); yields the pids seen."""
    seen: set[int] = set()
    stop = threading.Event()

    def keep() -> None:
        while True:
            with contextlib.suppress(OSError, ValueError):
                for row in status(run_dir)["nodes"]:
                    up = row.get("state") == "running" and row.get("pid")
                    if row["id"].startswith(prefix) and up:
                        renice(int(row["pid"]), niceness)
                        seen.add(int(row["pid"]))
            if stop.wait(0.5):
                return

    thread = threading.Thread(target=keep, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(10)


def shot(page: Any, tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 10_000
    return path


def stop_from_the_page(page: Any, proc: subprocess.Popen[str], pids: set[int]) -> None:
    """The Stop button, confirmed: the run ends with exit 0 and leaves nothing."""
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#act-stop")
    page.wait_for_selector("body[data-state='ended']")
    assert proc.wait(120) == 0
    assert not wait_gone(pids, 30)


@pytest.mark.timeout(1800)  # its producers keep every core busy: 11-17 min beside busy loops
def test_consumer_producers_live(browser: Any, tmp_path: Path, started: list) -> None:
    topology = tmp_path / "cp.yaml"
    topology.write_text(
        f"extends: {EXAMPLES / 'consumer_producers.yaml'}\n"
        "nodes:\n"
        "  producer:\n    restart: {policy: on-failure, max_restarts: 5}\n"
        # each item 50 times the example's work, 20,000 of them: the run lasts until the
        # test stops it
        '    args: {producer_id: "${replica}", rounds: 1000000}\n'
        "  consumer:\n    restart: {policy: on-failure, max_restarts: 5}\n"
        # the last of the items in flight wait in the producers' queues past the default
        # 60 s deadline
        "    rpc: {deadline_s: 3600}\n"
    )
    args = [str(topology), "-p", "num_producers=9", "-p", "work_items=20000"]
    proc, url, ui_pid, run_dir = start_with_ui(tmp_path, args, started)
    # The producers hash on every core as fast as they can: niced, with the program's
    # scheduling group, they leave the CPU to the browser, the dashboard and this test
    # outside the program, and inside it to the consumer and to a producer starting again,
    # which is niced once it runs.
    with niced(run_dir, "producer/", 15) as pids:
        wait_until(lambda: len(pids) >= 9, LOAD_S, what="every producer niced")
        live(page_of(browser, url), proc, run_dir, ui_pid, tmp_path)


def page_of(browser: Any, url: str) -> Any:
    """A page of the run (after the token is checked: none or a wrong one is refused)."""
    # no token, a wrong one: refused, in the browser as anywhere
    base = url.split("?")[0]
    other = browser.new_page()
    assert other.goto(base).status == 403
    assert other.goto(base + "?token=wrong").status == 403
    assert "no valid token" in other.inner_text("body")
    other.close()
    return open_page(browser, url)


def live(
    page: Any, proc: subprocess.Popen[str], run_dir: Path, ui_pid: int, tmp_path: Path
) -> None:
    """The run's page: its states, a group expanded, a producer killed and restarted,
    actions refused and confirmed, the run stopped from it."""
    # the group of 9 is one box, coloured and counted by its replicas' states: each
    # running, or busy (running, every handler thread serving a long work item) at times
    wait_js(page, UP_9, list(UP))
    assert page.get_attribute("#graph g.node.collapsed", "data-state") in UP
    assert re.search(rf"\d+ ({'|'.join(UP)})", page.text_content("#graph g.node.collapsed"))
    wait_js(page, f"() => {BOX}('consumer')?.dataset.state === 'running'")
    shot(page, tmp_path, "consumer_producers-graph")
    page.click("#graph g.node.collapsed")  # expanded: a box per producer
    page.wait_for_selector("#graph g.node[data-key='producer/7']")
    assert page.locator("#graph g.node[data-key^='producer/']").count() == 9
    page.click("#tabs [data-tab=nodes]")
    assert page.locator("#node-table tbody tr").count() == 10
    page.click("#tabs [data-tab=graph]")

    # a producer killed: the page shows it restart and come back
    victim = pid_of(run_dir, "producer/7")
    os.kill(victim, signal.SIGKILL)
    wait_js(page, RESTARTED, ["producer/7", 1])
    page.click("#graph g.node[data-key='producer/7']")
    page.wait_for_selector("#panel-history .item")
    assert "restarting" in page.inner_text("#panel-history")
    assert page.get_attribute("#graph g.node[data-key='producer/7']", "data-state") in UP
    page.click("#tabs [data-tab=events]")
    page.wait_for_selector("#event-list li[data-kind='restarting']")
    shot(page, tmp_path, "consumer_producers-restarted")
    page.click("#tabs [data-tab=graph]")

    # actions refused at the confirmation do nothing
    pid = pid_of(run_dir, "producer/7")

    def dismiss(dialog: Any) -> None:
        dialog.dismiss()

    page.on("dialog", dismiss)
    page.click("#act-restart")
    page.click("#act-stop")
    time.sleep(3)  # no event: a dismissed action sends nothing; time for one to show
    assert pid_of(run_dir, "producer/7") == pid
    assert status(run_dir)["state"] == "running" and proc.poll() is None
    assert node(page, "producer/7")["restarts"] == 1
    page.remove_listener("dialog", dismiss)

    # ... and confirmed, a restart goes through
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#act-restart")
    wait_js(page, RESTARTED, ["producer/7", 2])
    assert pid_of(run_dir, "producer/7") != pid

    page.reload()
    page.wait_for_selector("body[data-ready='1']")  # the cookie of the first visit

    pids = run_pids(run_dir) | {ui_pid}
    stop_from_the_page(page, proc, pids)
    assert page.errors == []


SMALL = {  # as tests/agents/test_dqn_programs.py keeps DQN short, but stopped by the test
    "num_actors": 2,  # (actor/1 is killed)
    "max_actor_steps": 2_000_000,
    "samples_per_insert": 16.0,
    "min_replay_size": 500,
    "eval_every_s": 3.0,
    "eval_episodes": 2,
}


def test_acme_distributed_curves_logs_and_restarts(
    browser: Any, tmp_path: Path, started: list
) -> None:
    args = [str(EXAMPLES / "acme_distributed.yaml")]
    params = {**SMALL, "snapshot_dir": str(tmp_path / "snapshots")}
    for key, value in params.items():
        args += ["-p", f"{key}={value}"]
    proc, url, ui_pid, run_dir = start_with_ui(tmp_path, args, started)
    page = open_page(browser, url)
    total = len(status(run_dir)["nodes"])
    wait_js(
        page,
        "(n) => Object.values(Topo.nodes).filter((x) => x.state === 'running').length === n",
        total,
    )

    # a learning curve grows
    page.click("#tabs [data-tab=curves]")
    chart = "#charts [data-chart='episode_return'] canvas"
    page.wait_for_selector(chart)
    wait_js(page, f'() => Number(document.querySelector("{chart}").dataset.points) > 0')
    before = int(page.get_attribute(chart, "data-points"))
    wait_js(page, f'(b) => Number(document.querySelector("{chart}").dataset.points) > b', before)
    shot(page, tmp_path, "acme-curves")

    # a log followed: the evaluator's lines come in while the panel is open
    page.click("#tabs [data-tab=graph]")
    page.click("#graph g.node[data-key='evaluator/0']")
    wait_js(page, "() => document.querySelector('#log').textContent.includes('mean return')")
    lines = int(page.get_attribute("#log", "data-lines") or 0)
    wait_js(page, "(n) => Number(document.querySelector('#log').dataset.lines) > n", lines)
    page.fill("#log-search", "mean return")
    page.press("#log-search", "Enter")
    page.wait_for_selector("#log mark")
    page.fill("#log-search", "")
    page.press("#log-search", "Enter")

    # an actor killed comes back (its group restarts on failure)
    os.kill(pid_of(run_dir, "actor/1"), signal.SIGKILL)
    wait_js(page, RESTARTED, ["actor/1", 1])
    page.click("#graph g.node[data-key='learner']")
    page.wait_for_selector("#panel-rpc table")
    wait_js(
        page, "() => document.querySelector('#panel-rpc').textContent.includes('get_variables')"
    )
    page.wait_for_selector("#panel-metrics .chart canvas")
    wanted = os.environ.get("TOPO_DASHBOARD_PNG")  # the README's picture: a while later
    if wanted:
        wait_js(
            page, "() => (Topo.nodes['evaluator/0'].metrics.mean_return || 0) >= 120", None, 240
        )
    time.sleep(1)  # the picture: the charts' last frame drawn
    picture = shot(page, tmp_path, "acme-dashboard")
    if wanted:
        shutil.copy(picture, wanted)
    page.click("#panel-close")

    pids = run_pids(run_dir) | {ui_pid}
    stop_from_the_page(page, proc, pids)
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    assert any(e["kind"] == "restarting" and e.get("node") == "actor/1" for e in events)
    assert page.errors == []
