"""SIGTERM as a notice in a Slurm step (``topo.runtime.sigterm``), on real processes: with
``HOLD_ENV`` a process lives through SIGTERM while one forked from it without ``exec``
ends as it would have; without it nothing changes; the stream agent in a step reports
the SIGTERM to its launcher (``signal``). No cluster needed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from topo.runtime.sigterm import HOLD_ENV
from topo.testing import wait_until

ROOT = Path(__file__).resolve().parents[3]
HOLDER = r"""
import os, sys, time
from topo.runtime.sigterm import hold_sigterm
held = hold_sigterm()
if os.fork() == 0:  # (it says so once it runs: a signal before Python's after-fork is lost)
    os.write(1, f"forked {os.getpid()}\n".encode())  # (one write: the lines do not mix)
    while True:
        time.sleep(1)
os.write(1, f"held {held}\n".encode())
for line in sys.stdin:
    print("alive", flush=True)
"""


def _env(hold: bool, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != HOLD_ENV and not k.startswith("SLURM_")}
    env["PYTHONPATH"] = str(ROOT)
    if hold:
        env[HOLD_ENV] = "1"
    return {**env, **more}


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _holder(hold: bool) -> tuple[subprocess.Popen[str], bool, int]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=_env(hold),
    )
    assert proc.stdout is not None
    said = dict(proc.stdout.readline().split() for _ in range(2))  # (in either order)
    return proc, said["held"] == "True", int(said["forked"])


def test_a_holding_process_lives_through_sigterm_and_its_fork_does_not() -> None:
    proc, held, forked = _holder(hold=True)
    try:
        assert held
        os.kill(forked, signal.SIGTERM)
        proc.send_signal(signal.SIGTERM)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("still there?\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "alive\n"  # (EOF had it died)
        wait_until(lambda: _gone(forked), 60, what="the forked process ended by SIGTERM")
        assert proc.poll() is None
    finally:
        proc.kill()
        if not _gone(forked):
            os.kill(forked, signal.SIGKILL)
        proc.wait(60)


def test_without_the_env_sigterm_ends_the_process_as_before() -> None:
    proc, held, forked = _holder(hold=False)
    try:
        assert not held
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == -signal.SIGTERM
    finally:
        proc.kill()
        if not _gone(forked):
            os.kill(forked, signal.SIGKILL)
    wait_until(lambda: _gone(forked), 60, what="the forked process gone")


def test_the_agent_in_a_slurm_step_reports_sigterm_and_goes_on() -> None:
    agent = subprocess.Popen(
        [sys.executable, "-m", "topo.backends.remote.stream"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=_env(hold=True, SLURM_STEP_ID="0"),
    )
    assert agent.stdout is not None and agent.stdin is not None
    try:
        hello = json.loads(agent.stdout.readline())
        assert hello["t"] == "hello" and hello["pid"] == agent.pid
        wait_until(  # (its handler is set once the runtime is imported, after the hello)
            lambda: _handles_sigterm(agent.pid), 60, what="the agent holding SIGTERM"
        )
        agent.send_signal(signal.SIGTERM)
        assert json.loads(agent.stdout.readline()) == {"t": "signal", "name": "SIGTERM"}
        agent.stdin.close()  # EOF before its init: it ends
        assert agent.wait(60) == 0
    finally:
        agent.kill()
        agent.wait(60)


def _handles_sigterm(pid: int) -> bool:
    """Whether process ``pid`` catches SIGTERM (its ``SigCgt`` mask in /proc)."""
    with open(f"/proc/{pid}/status") as status:
        caught = next(line for line in status if line.startswith("SigCgt:"))
    return bool(int(caught.split()[1], 16) >> (signal.SIGTERM - 1) & 1)
