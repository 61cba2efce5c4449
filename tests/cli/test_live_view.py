"""The live table of ``topo run`` in a real terminal (tmux): every node's id and state at
80 and 120 columns, the last log line as wide as the terminal allows, 300 nodes collapsed
by group, ``stopping M:SS/M:SS`` during the grace, what a starting node waits for, and no
"all N nodes up" once Ctrl-C was pressed."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from tests.cli.view_nodes import FINAL
from topo.testing import wait_gone, wait_until

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent  # view_nodes.py, the test nodes
LONG = "sum = 12978 " + " ".join(f"word{i}" for i in range(12)) + " END-OF-LINE"  # ~95 characters

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (./dev installs it)"),
]


class Tmux:
    """``topo run ...`` in a tmux session of its own server (socket ``-L name``)."""

    def __init__(self, tmp: Path, width: int, height: int, *args: str) -> None:
        self.socket = f"topo-view-{uuid.uuid4().hex[:10]}"
        conf = tmp / "tmux.conf"
        conf.write_text("set -g remain-on-exit on\nset -g history-limit 5000\n")
        env = f"PYTHONPATH={ROOT}:{HERE} TERM=xterm-256color"
        # A small parent prints topo's exit code into the terminal (tmux does not always
        # have the pane's status); it lets the terminal's SIGINT through to topo only.
        parent = (
            "import signal, subprocess, sys; signal.signal(signal.SIGINT, lambda *a: None); "
            "code = subprocess.call(sys.argv[1:]); print(f'[topo exited {code}]', flush=True)"
        )
        command = (
            f"exec env -u COLUMNS -u LINES {env} {sys.executable} -c {shlex.quote(parent)} "
            f"{sys.executable} -m topo run " + " ".join(shlex.quote(a) for a in args)
        )
        # The pane starts with a command, not a login shell: a shell's rc files (pyenv's
        # rehash) killed halfway by the respawn below left a lock every later bash
        # (the ssh test hosts') waited 60 s on.
        self.tmux(
            "-f", str(conf), "new-session", "-d", "-s", "v", "-x", str(width), "-y", str(height),
            "exec sleep 3600",
        )  # fmt: skip
        self.tmux("respawn-pane", "-k", "-t", "v", command)
        self.server = int(self.tmux("display", "-p", "-t", "v", "#{pid}"))
        self.socket_path = Path(self.tmux("display", "-p", "-t", "v", "#{socket_path}"))
        self.parent = int(self.tmux("display", "-p", "-t", "v", "#{pane_pid}"))
        self.seen: set[int] = {self.parent}

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=20
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def screen(self) -> str:
        """What the terminal shows now (wrapped lines joined)."""
        self.note_pids()
        return self.tmux("capture-pane", "-p", "-J", "-t", "v")

    def history(self) -> str:
        """Everything the run printed, scrolled-off lines included."""
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "v")

    def wait_for(self, check: Callable[[str], bool], timeout: float) -> str:
        """The screen once ``check`` holds of it (after ``timeout``: the screen then)."""
        try:
            return wait_until(lambda: s if check(s := self.screen()) else None, timeout, every=0.2)
        except AssertionError:
            return self.screen()

    def note_pids(self) -> None:
        """Remember the run's processes (to check that none is left)."""
        try:
            self.seen.update(p.pid for p in psutil.Process(self.parent).children(True))
        except psutil.NoSuchProcess:
            pass

    def exited(self, timeout: float) -> str:
        """Wait for the run to end: topo's exit code (on timeout: which of the run's
        processes are still there)."""
        try:
            found = wait_until(
                lambda: re.search(r"\[topo exited (-?\d+)\]", self.screen()), timeout, every=0.2
            )
        except AssertionError:
            return f"still running: {self.processes()}"
        return found.group(1)

    def processes(self) -> list[str]:
        """The run's processes still there, as ``pid status command``."""
        found = []
        for pid in sorted(self.seen):
            try:
                p = psutil.Process(pid)
                found.append(f"{pid} {p.status()} {' '.join(p.cmdline())[:120]}")
            except psutil.NoSuchProcess:
                pass
        return found

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=20)
        for pid in self.seen:
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        assert not wait_gone([*self.seen, self.server], 15)
        self.socket_path.unlink(missing_ok=True)  # kill-server may leave it behind


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Callable[..., Tmux]]:
    """``terminal(width, height, *run_args)``: a ``topo run`` in tmux, closed after."""
    made: list[Tmux] = []

    def start(width: int, height: int, *args: str) -> Tmux:
        made.append(Tmux(tmp_path, width, height, *args, "--log-dir", str(tmp_path / "runs")))
        return made[-1]

    yield start
    for t in made:
        t.close()


def topology(tmp_path: Path, text: str) -> str:
    path = tmp_path / "topology.yaml"
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return str(path)


def row(screen: str, node: str) -> str:
    """The table row of ``node`` (its id first on the line)."""
    rows = [line for line in screen.splitlines() if line.split()[:1] == [node]]
    assert rows, f"no row for {node}:\n{screen}"
    return rows[-1]


SMALL = f"""
    name: view_small
    nodes:
      replay: {{target: "view_nodes:Idle", args: {{line: "{LONG}"}}}}
      learner: {{target: "view_nodes:Idle"}}
      actor: {{target: "view_nodes:Idle", count: 4}}
      slow_to_stop: {{target: "view_nodes:SlowToStop", args: {{seconds: 3}}}}
"""
NODES = ["replay", "learner", "actor/0", "actor/1", "actor/2", "actor/3", "slow_to_stop"]


@pytest.mark.parametrize("width", [80, 120, 200])
def test_every_node_and_its_state_shows_at_any_width_and_the_grace_counts(
    tmp_path: Path, terminal: Callable[..., Tmux], width: int
) -> None:
    path = topology(tmp_path, SMALL)
    run = terminal(width, 40, path, "-b", "threads", "--grace", "6")
    screen = run.wait_for(lambda s: all(f"{n} " in s for n in NODES) and LONG[:12] in s, 60)
    screen = run.wait_for(lambda s: s.count(" running ") >= len(NODES), 30)
    header = next(line for line in screen.splitlines() if line.startswith("node "))
    assert "state" in header and "restarts" in header, screen
    for node in NODES:
        assert " running " in row(screen, node), screen
    assert all(len(line) <= width for line in screen.splitlines())
    if width >= 200:  # the last line is not cut at some fixed width
        assert LONG in row(screen, "replay"), screen
    if width >= 120:
        assert "pid" in header and "uptime" in header, screen
    run.tmux("send-keys", "-t", "v", "C-c")
    grace = re.compile(r"stopping 0:0\d/0:06")
    screen = run.wait_for(lambda s: grace.search(s) is not None, 20)
    assert grace.search(row(screen, "slow_to_stop")), screen
    assert run.exited(40) == "130", run.history()
    history = run.history()
    assert history.count("nodes up") == 1, history  # before Ctrl-C
    assert history.count("view_small — threads") == 1, history  # no stale line of a redraw
    # What the view showed is in status.json too, for `topo attach`.
    (status_file,) = (tmp_path / "runs").glob("*-*/status.json")
    status = json.loads(status_file.read_text())
    assert status["grace_s"] == 6 and status["stopping_since"] > status["started"]
    assert status["limiter"] is None
    nodes = {n["id"]: n for n in status["nodes"]}
    assert nodes["replay"]["last_line"] == LONG and nodes["replay"]["phase"] == ""


REPORTING = """
    name: view_metrics
    nodes:
      learner: {target: "view_nodes:Idle"}
      evaluator: {target: "view_nodes:Evaluator", args: {line: "evaluated episode"}}
"""


@pytest.mark.parametrize("width", [80, 120, 200])
def test_a_metrics_value_and_the_closing_line_show_whole_at_any_width(
    tmp_path: Path, terminal: Callable[..., Tmux], width: int
) -> None:
    path = topology(tmp_path, REPORTING)
    run = terminal(width, 30, path, "-b", "threads", "--grace", "5")
    screen = run.wait_for(lambda s: "213.4" in s, 60)
    header = next(line for line in screen.splitlines() if line.startswith("node "))
    assert "executable" not in header, screen  # every executable is named as its node
    assert re.search(r"return 213\.4", row(screen, "evaluator")), screen
    if width >= 200:
        assert re.search(r"mean_return 213\.4 · actor_steps \d", row(screen, "evaluator")), screen
    run.tmux("send-keys", "-t", "v", "C-c")
    assert run.exited(40) == "130", run.history()
    history = run.history()  # wrapped lines joined: a line printed whole reads whole
    assert f"evaluator | {FINAL}" in history.splitlines(), history
    assert history.index(f"evaluator | {FINAL}") > history.rindex("view_metrics — threads")


def test_300_nodes_collapse_by_group(tmp_path: Path, terminal: Callable[..., Tmux]) -> None:
    path = topology(
        tmp_path,
        """
        name: view_big
        nodes:
          learner: {target: "view_nodes:Idle"}
          actor: {target: "view_nodes:Idle", count: 300}
        """,
    )
    run = terminal(80, 40, path, "-b", "threads", "--grace", "5")
    screen = run.wait_for(lambda s: "300 running" in s, 90)
    assert "300 running" in row(screen, "actor"), screen
    assert "actor ×300" in screen, screen
    assert " running " in row(screen, "learner"), screen
    assert "actor/1" not in screen and "more" not in screen, screen
    run.tmux("send-keys", "-t", "v", "C-c")
    assert run.exited(60) == "130", run.history()


def test_starting_nodes_say_what_they_wait_for_and_ctrl_c_hides_all_up(
    tmp_path: Path, terminal: Callable[..., Tmux]
) -> None:
    path = topology(
        tmp_path,
        """
        name: view_phases
        nodes:
          replay: {target: "view_nodes:SlowBuild", args: {seconds: 8}}
          actor: {target: "view_nodes:NeedsPeer", count: 2, args: {peer: "@replay"}}
        """,
    )
    run = terminal(120, 30, path, "-b", "procs", "--grace", "20")
    screen = run.wait_for(lambda s: "waiting for replay" in s, 60)
    assert re.search(r"starting \d:\d\d · waiting for replay", row(screen, "actor/0")), screen
    assert "· building" in row(screen, "replay"), screen
    run.tmux("send-keys", "-t", "v", "C-c")  # replay becomes ready during the grace
    assert run.exited(60) == "130", run.history()
    assert "nodes up" not in run.history()


def test_nodes_ready_after_ctrl_c_do_not_print_all_up(
    tmp_path: Path, terminal: Callable[..., Tmux]
) -> None:
    path = topology(
        tmp_path,
        """
        name: view_interrupted
        nodes:
          slow: {target: "view_nodes:SlowBuild", args: {seconds: 4}}
          idle: {target: "view_nodes:Idle"}
        """,
    )
    run = terminal(100, 30, path, "-b", "threads", "--grace", "30")
    screen = run.wait_for(lambda s: "· building" in s, 60)
    assert "· building" in row(screen, "slow"), screen
    run.tmux("send-keys", "-t", "v", "C-c")  # slow becomes ready during the grace
    assert run.exited(60) == "130", run.history()
    assert "nodes up" not in run.history()


def test_a_steps_limiters_progress_is_in_the_title(
    tmp_path: Path, terminal: Callable[..., Tmux]
) -> None:
    path = topology(
        tmp_path,
        """
        name: view_limit
        nodes:
          counter: {target: "topo.nodes:Counter"}
          coordinator:
            target: "topo.nodes:StepsLimiter"
            stops_program: true
            args: {counter: "@counter", max_steps: 2000, steps_key: actor_steps}
          actor: {target: "view_nodes:Stepper", count: 2, args: {counter: "@counter"}}
        """,
    )
    run = terminal(100, 30, path, "-b", "threads", "--grace", "5")
    progress = re.compile(r"view_limit — threads · actor_steps \d+(\.\d+k)?/2k · ~\d+ s")
    screen = run.wait_for(lambda s: progress.search(s) is not None, 60)
    assert progress.search(screen), screen
    assert run.exited(60) == "0", run.history()  # the limiter stopped it
    assert "actor_steps reached" in run.history()
    (status_file,) = (tmp_path / "runs").glob("*-*/status.json")
    limiter = json.loads(status_file.read_text())["limiter"]
    assert limiter["node"] == "coordinator" and limiter["limit"] == 2000
    assert limiter["steps"] > 2000
