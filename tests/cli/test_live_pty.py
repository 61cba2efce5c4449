"""``topo run --live`` on a real pseudo-terminal: the live table comes up, and Ctrl-C
(the terminal's ``^C``) or SIGTERM stops the run quickly on both backends.

The threads backend used to hang here at full CPU, deaf to Ctrl-C and SIGTERM: the live
table's stdout proxy and the per-thread log router wrote into each other.
"""

from __future__ import annotations

import fcntl
import os
import pty
import signal
import struct
import subprocess
import sys
import termios
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.cli.view_nodes import FINAL
from topo.testing import wait_gone, wait_until

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent  # view_nodes.py, the test nodes
TOPO = [sys.executable, "-c", "from topo.cli import main; main()"]


class PtyRun:
    """``topo run`` with stdin/stdout/stderr on a pty that is its controlling terminal."""

    def __init__(self, *args: str, width: int = 160) -> None:
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, width, 0, 0))
        self.master = master
        self.output = bytearray()
        env = dict(os.environ, PYTHONPATH=f"{ROOT}:{HERE}", TERM="xterm-256color")
        env.pop("NO_COLOR", None)
        env.pop("COLUMNS", None)

        def own_terminal() -> None:  # runs in the child: new session, the pty as its tty
            os.setsid()
            fcntl.ioctl(0, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(
            [*TOPO, *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=ROOT,
            env=env,
            preexec_fn=own_terminal,
        )
        os.close(slave)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.output.extend(data)

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def wait_for(self, what: str, timeout: float) -> bool:
        """Whether ``what`` was shown within ``timeout``."""
        try:
            wait_until(lambda: what in self.text(), timeout)
        except AssertionError:
            return False
        return True

    def pids(self) -> list[int]:
        """The launcher and every process below it."""
        try:
            me = psutil.Process(self.proc.pid)
            return [self.proc.pid, *(p.pid for p in me.children(recursive=True))]
        except psutil.NoSuchProcess:
            return [self.proc.pid]

    def close(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)
        os.close(self.master)


@pytest.mark.slow
@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
@pytest.mark.parametrize("backend", ["threads", "procs"])
def test_live_table_on_a_terminal_stops_on_ctrl_c_and_sigterm(
    tmp_path: Path, backend: str, how: str
) -> None:
    run = PtyRun(
        "run",
        "examples/topologies/consumer_producers.yaml",
        "--live",
        "-b",
        backend,
        "--grace",
        "1",
        "-p",
        "num_producers=2",
        "-p",
        "work_items=1000000",
        "--log-dir",
        str(tmp_path),
    )
    try:
        assert run.wait_for("running", 30), run.text()
        assert run.wait_for("nodes up in", 30), run.text()
        pids = run.pids()
        if backend == "procs":
            assert len(pids) >= 4, pids  # launcher, fork server, three executables
        started = time.monotonic()
        if how == "ctrl-c":
            os.write(run.master, b"\x03")  # the terminal turns it into SIGINT
            expected = 130
        else:
            run.proc.send_signal(signal.SIGTERM)
            expected = 143
        code = run.proc.wait(timeout=15)
        took = time.monotonic() - started
        run._reader.join(2)
        out = run.text()
        assert code == expected, out
        assert took < 10, took
        for node in ("producer/0", "producer/1", "consumer"):
            assert node in out
        assert f"exit {expected}" in out
        assert not wait_gone(pids, 15)
    finally:
        run.close()


@pytest.mark.slow
def test_an_80_column_terminal_shows_the_return_and_the_closing_line_whole(
    tmp_path: Path,
) -> None:
    topology = tmp_path / "reporting.yaml"
    topology.write_text(
        "name: reporting\n"
        "nodes:\n"
        "  learner: {target: 'view_nodes:Idle'}\n"
        "  evaluator: {target: 'view_nodes:Evaluator'}\n"
    )
    run = PtyRun("run", str(topology), "-b", "procs", "--log-dir", str(tmp_path), width=80)
    try:
        assert run.wait_for("return 213.4", 60), run.text()  # in the metrics column
        pids = run.pids()
        os.write(run.master, b"\x03")
        assert run.proc.wait(timeout=30) == 130, run.text()
        run._reader.join(2)
        out = run.text()
        assert FINAL in out, out  # printed whole under the table: the terminal wraps it
        assert out.index(FINAL) > out.rindex("reporting — procs")
        assert not wait_gone(pids, 15)
    finally:
        run.close()
