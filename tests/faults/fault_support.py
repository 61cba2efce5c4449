"""Helpers of the fault tests: ``topo run`` as a real subprocess, and pid bookkeeping."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil

from topo.testing import alive, read_until, wait_for_text, wait_gone

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TOPO = [sys.executable, "-c", "from topo.cli import main; main()"]


def cli_env() -> dict[str, str]:
    """The environment of a ``topo run`` subprocess: fault_nodes importable, plain output."""
    return dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), str(HERE)]), NO_COLOR="1", COLUMNS="200"
    )


def kill_pids(pids: Iterable[int]) -> None:
    """SIGKILL what is still alive of ``pids`` (a failed test must not leak processes)."""
    for pid in alive(pids):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def read_pids(path: Path, timeout: float = 60) -> list[int]:
    """The pids a node wrote to ``path`` (waits for the file)."""
    return [int(x) for x in wait_for_text(path, timeout=timeout).split()]


@contextmanager
def topo_run(*args: str) -> Iterator[subprocess.Popen[str]]:
    """``topo run ARGS`` as a subprocess (output piped, merged); killed at exit if still
    running, and every process below it checked gone by pid."""
    proc = subprocess.Popen(
        [*TOPO, "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=cli_env(),
        cwd=ROOT,
    )
    seen: set[int] = set()
    try:
        yield proc
    finally:
        if proc.poll() is None:
            seen.update(descendants(proc.pid))
            proc.kill()
            proc.wait()
        kill_pids(seen)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` now."""
    try:
        return [p.pid for p in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def wait_up(proc: subprocess.Popen[str], timeout: float = 60) -> list[str]:
    """Read ``topo run`` output until every node is up; the lines read."""
    return read_until(proc, " up in ", timeout)


__all__ = [
    "alive",
    "cli_env",
    "descendants",
    "kill_pids",
    "read_pids",
    "topo_run",
    "wait_gone",
    "wait_up",
]
