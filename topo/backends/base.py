"""The backend interface: what every backend (threads, procs, later ssh) implements.

A backend only knows how to *start one executable* of a compiled ``Program``
and how to signal or kill it; everything else (address book, status events,
failure policy, restarts, stopping, logs) is the shared ``Launcher``. Status
from inside executables (node ready / finished / failed) and their exits
reach the launcher through the ``Sink`` callbacks, whichever way the backend
carries them.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from topo.ir import Program
from topo.runtime import RegistryInfo

EventKind = Literal[
    "starting", "started", "ready", "log", "finished", "failed", "exited",
    "restarting", "stopping", "killed", "stopped",
]


@dataclass(frozen=True)
class Event:
    """One status change of a running program, as shown by the live view."""

    kind: EventKind
    node: str | None = None
    executable: str | None = None
    pid: int | None = None
    message: str = ""
    time: float = 0.0
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunOptions:
    """How to run a program (independent of the backend)."""

    grace_s: float | None = None  # None: the program's stop.grace_s
    run_dir: Path | None = None  # None: <log_dir>/<name>-<timestamp>
    log_dir: Path = Path("runs")
    disable_run: bool = False  # courier nodes only serve; their run() is not called
    default_deadline: float | None = None  # None: the groups' rpc.deadline_s
    topology_yaml: str | None = None  # resolved YAML text, written to the run directory


@dataclass(frozen=True)
class JobContext:
    """What a backend needs to start executables of one run."""

    program: Program
    options: RunOptions
    registry: RegistryInfo
    run_dir: Path
    launcher_pid: int


class Sink(ABC):
    """Where a backend reports what happens inside and to its executables."""

    @abstractmethod
    def node_status(self, kind: str, node: str, exe: str, attempt: int, pid: int,
                    traceback: str = "") -> None:
        """A node is ``ready``, ``finished`` (run() returned) or ``failed`` (raised)."""

    @abstractmethod
    def started(self, exe: str, attempt: int, pid: int) -> None:
        """The pid of an attempt is known (if ``start`` could not return it)."""

    @abstractmethod
    def exited(self, exe: str, attempt: int, pid: int, code: int) -> None:
        """An executable ended: ``code`` is its exit status, ``-N`` when killed by signal N."""


class ExecutableRunner(ABC):
    """One started attempt of one executable."""

    exe: str
    attempt: int
    pid: int

    @abstractmethod
    def kill(self) -> None:
        """End it at once (SIGKILL, or abandon threads)."""


class Backend(ABC):
    """Starts executables of a program; the ``Launcher`` does the rest."""

    name: str = ""

    @abstractmethod
    def open(self, job: JobContext, sink: Sink) -> None:
        """Prepare a run (e.g. start the pre-warmed fork server)."""

    @abstractmethod
    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        """Start ``attempt`` (0, 1, ...) of executable ``exe``; return at once."""

    def helper_pids(self) -> list[int]:
        """Processes the backend started besides executables (e.g. a fork server)."""
        return []

    @abstractmethod
    def close(self) -> None:
        """Release everything ``open`` made; every executable has exited or been killed."""


_BACKENDS: dict[str, str] = {
    "threads": "topo.backends.threads:ThreadsBackend",
    "procs": "topo.backends.procs:ProcsBackend",
}


def available_backends() -> list[str]:
    """Names accepted by ``get_backend``."""
    return sorted(_BACKENDS)


def get_backend(name: str) -> Backend:
    """A fresh backend object by name ("threads" or "procs")."""
    try:
        target = _BACKENDS[name]
    except KeyError:
        raise ValueError(f"unknown backend {name!r}; choose one of "
                         f"{', '.join(available_backends())}") from None
    module, attr = target.split(":")
    factory: Callable[[], Backend] = getattr(importlib.import_module(module), attr)
    return factory()
