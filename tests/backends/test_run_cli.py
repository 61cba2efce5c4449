"""``topo run`` as a real command: output, exit codes, Ctrl-C and the launcher's death."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest

from topo.testing import Lines, read_until, wait_gone

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TOPO = [sys.executable, "-c", "from topo.cli import main; main()"]
SERVERS = """
    name: servers
    nodes:
      echo: {target: "bk_nodes:Echo", count: 3}
      stubborn: {target: "bk_nodes:Stubborn"}
"""


def _env() -> dict[str, str]:
    return dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]), NO_COLOR="1", COLUMNS="200"
    )


def _topo(
    *args: str, timeout: float = 90, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TOPO, *args], capture_output=True, text=True, env=env or _env(), cwd=ROOT, timeout=timeout
    )


def _start(*args: str, prefix: tuple[str, ...] = ()) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*prefix, *TOPO, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
        cwd=ROOT,
    )


def _wait_up(proc: subprocess.Popen[str], nodes: int) -> tuple[list[int], list[str]]:
    """Read output until every node is up; (pids of the launcher's descendants, lines)."""
    lines = read_until(proc, "nodes up in")
    kids = [p.pid for p in psutil.Process(proc.pid).children(recursive=True)]
    assert len(kids) == nodes + 1, kids  # the executables and the fork server
    return kids, lines


@pytest.mark.slow
def test_run_consumer_producers_prints_prefixed_lines(tmp_path: Path) -> None:
    """Targets found from the current directory; the lines and log files of every backend
    are the conformance suite's (tests/backends/test_conformance.py)."""
    env = dict(_env(), PYTHONPATH="")  # node targets resolve from the current directory
    result = _topo(
        "run",
        "examples/topologies/consumer_producers.yaml",
        "--no-live",
        "--log-dir",
        str(tmp_path),
        "-p",
        "num_producers=2",
        env=env,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "consumer" in result.stdout and "| consumer: 32 results from 2 producers" in (
        result.stdout
    )
    assert "exit 0" in result.stderr
    (run_dir,) = [p for p in tmp_path.iterdir() if not p.is_symlink()]
    assert {p.name for p in (run_dir / "logs").iterdir()} == {
        "producer_0.log",
        "producer_1.log",
        "consumer.log",
    }
    status = json.loads((run_dir / "status.json").read_text())
    assert status["exit_code"] == 0
    assert not wait_gone([n["pid"] for n in status["nodes"]], 15)


@pytest.mark.slow
def test_live_table_shows_every_node_with_its_state(tmp_path: Path) -> None:
    result = _topo(
        "run",
        "examples/topologies/consumer_producers.yaml",
        "--live",
        "--log-dir",
        str(tmp_path),
        "-p",
        "num_producers=2",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    for header in ("node", "state", "pid", "restarts", "uptime", "last log line"):
        assert header in out
    for node in ("producer/0", "producer/1", "consumer"):
        assert node in out
    assert "finished" in out  # the table's last frame shows how each node ended


def test_bad_file_exits_1_without_starting(tmp_path: Path, topology: Callable) -> None:
    path = topology("name: bad\nnodes:\n  x: {target: 'bk_nodes:Echo', count: -1}\n")
    result = _topo("run", str(path), "--log-dir", str(tmp_path))
    assert result.returncode == 1
    assert not list(tmp_path.glob("bad-*"))


@pytest.mark.slow
def test_ctrl_c_stops_everything_within_the_grace(tmp_path: Path, topology: Callable) -> None:
    proc = _start(
        "run", str(topology(SERVERS)), "--no-live", "--grace", "1", "--log-dir", str(tmp_path)
    )
    try:
        kids, _ = _wait_up(proc, 4)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 130, out
        assert "Ctrl-C" in out and "grace period" in out  # the stubborn node was killed
        assert not wait_gone(kids, 15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _autogroup_nice(pid: int) -> int | None:
    """The niceness of ``pid``'s autogroup ("/autogroup-56 nice 0"), or None where it has
    none: an empty file for a process in the first session (PID 1's, never setsid), as
    in a container, where CI runs."""
    try:
        words = Path(f"/proc/{pid}/autogroup").read_text().split()
    except OSError:
        return None
    return int(words[-1]) if words else None


@pytest.mark.slow
def test_nice_topo_run_makes_the_whole_program_yield(tmp_path: Path, topology: Callable) -> None:
    """The fork server starts a session, so a scheduling group of its own where Linux
    has autogroups: the group takes the launcher's niceness, as each process does."""
    here = _autogroup_nice(os.getpid())  # None in the first session (PID 1's), as in CI
    proc = _start(
        "run",
        str(topology(SERVERS)),
        "--no-live",
        "--grace",
        "1",
        "--log-dir",
        str(tmp_path),
        prefix=("nice", "-n", "7"),
    )
    try:
        kids, _ = _wait_up(proc, 4)
        wanted = os.getpriority(os.PRIO_PROCESS, 0) + 7
        groups = {}
        for pid in kids:  # the fork server and the four executables
            assert os.getpriority(os.PRIO_PROCESS, pid) == wanted
            assert os.getsid(pid) != os.getsid(proc.pid)  # its group: not the launcher's
            groups[pid] = _autogroup_nice(pid)
        assert _autogroup_nice(proc.pid) == here  # the launcher's group is the shell's
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)
        assert not wait_gone(kids, 15)
        if None in groups.values():
            pytest.skip("a new session gets no autogroup here")
        assert groups == dict.fromkeys(kids, wanted)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_second_ctrl_c_kills_at_once(tmp_path: Path, topology: Callable) -> None:
    proc = _start(
        "run", str(topology(SERVERS)), "--no-live", "--grace", "60", "--log-dir", str(tmp_path)
    )
    try:
        kids, _ = _wait_up(proc, 4)
        assert proc.stdout is not None
        said = Lines(proc.stdout)
        proc.send_signal(signal.SIGINT)
        said.wait_for("Ctrl-C again", 30)  # the first one taken: it says what a second does
        proc.send_signal(signal.SIGINT)
        proc.wait(30)  # far less than the 60 s grace
        said.wait_closed(30)
        assert proc.returncode == 130
        assert not wait_gone(kids, 15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.slow
def test_kill9_of_the_launcher_leaves_nothing_behind(tmp_path: Path, topology: Callable) -> None:
    proc = _start("run", str(topology(SERVERS)), "--no-live", "--log-dir", str(tmp_path))
    try:
        kids, _ = _wait_up(proc, 4)
        proc.kill()
        proc.wait(10)
        assert not wait_gone(kids, 10)  # the behaviour is "within 5 s"; slack for a busy box
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
