"""Helpers shared by the runtime tests (a module of its own: test modules in different
folders cannot all import a module named ``conftest``)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable

import psutil


def assert_gone(pid: int) -> None:
    """The process is gone (reaped or never a zombie of ours)."""
    if psutil.pid_exists(pid):
        assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, f"pid {pid} still alive"


Spawn = Callable[..., subprocess.Popen[bytes]]
