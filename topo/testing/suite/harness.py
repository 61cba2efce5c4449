"""What the conformance suite needs to know of a backend (``BackendUnderTest``, given by
the subclass's fixture) and the means its tests share (``Harness``): topologies written
to the test's folder, programs started with ``topo.launch`` or the ``topo`` command,
the skips a backend's ``cannot`` asks for, and the check that nothing is left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from topo.rundir.layout import STATUS_FILE, log_path
from topo.testing.waiting import wait_gone

if TYPE_CHECKING:
    from topo.api import RunningProgram

# The folder the ``topo`` under test is imported from: first on the path of the commands
# the suite runs, so they run this code whatever is installed.
CODE_ROOT = Path(__file__).resolve().parents[3]
NODES = "topo.testing.nodes"
# What a backend may declare it cannot do (``Backend.cannot``; ``update``: ``can_update``).
CAPABILITIES = {
    "kill": "end one executable's process alone",
    "memory": "hold a group to its resources.memory",
    "update": "change a running program (topo apply)",
    "devices": "hold a process off the accelerators (CPU-only by default)",
}
RIGHTS_NODES = "topo.testing.rights_nodes"


@dataclass(frozen=True)
class BackendUnderTest:
    """How to run programs on the backend under test: its registered ``name``, the
    ``options`` its constructor takes (``topo.launch(backend_options=...)``) and the same
    as command-line ``flags`` of ``topo run``; ``env``: more environment for the ``topo``
    commands (a plug-in's folders on ``PYTHONPATH``); ``ready_s``: how long a program may
    take to come up. Pids: where ``pids_local`` is False the node pids are not this
    machine's, and ``gone(pids, timeout)`` (the backend's own means) says which are
    still running; ``leftovers(timeout)`` names what a run left on the backend's hosts
    (empty when nothing)."""

    name: str
    options: Mapping[str, Any] = field(default_factory=dict)
    flags: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    ready_s: float = 60.0
    pids_local: bool = True
    gone: Callable[[Iterable[int], float], list[int]] | None = None
    leftovers: Callable[[float], object] | None = None
    kill: Callable[[int], None] | None = None  # default: SIGKILL by pid on this machine

    def cannot(self) -> dict[str, str]:
        """What the backend says it cannot do (``Backend.cannot``, and ``update`` when it
        cannot change a running program), capability -> why."""
        from topo.backends.base import backend_factory

        factory = backend_factory(self.name)
        said = dict(getattr(factory, "cannot", {}))
        if not getattr(factory, "can_update", False):
            said["update"] = "it cannot change a running program (can_update is False)"
        return said


class Harness:
    """One suite test's means: ``write`` a topology, ``launch`` it, run ``topo`` commands,
    ``needs`` a capability, and ``assert_nothing_left`` at the end."""

    def __init__(self, under_test: BackendUnderTest, topo_launch: Any, tmp_path: Path) -> None:
        self.ut = under_test
        self._launch = topo_launch
        self.tmp = tmp_path

    # -- the backend's capabilities -------------------------------------------------
    def needs(self, capability: str) -> None:
        """Skip the test, saying why, when the backend declares it cannot do this."""
        why = self.ut.cannot().get(capability)
        if why is not None:
            what = CAPABILITIES.get(capability, capability)
            pytest.skip(f"the {self.ut.name} backend cannot {what}: {why}")

    # -- programs -------------------------------------------------------------------
    def write(self, text: str, name: str = "program.yaml") -> Path:
        """``text`` (dedented) as a topology file in the test's folder."""
        path = self.tmp / name
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    def launch(self, source: Any, **kwargs: Any) -> RunningProgram:
        """``topo.launch(source)`` on the backend (stopped and checked at the test's end)."""
        kwargs.setdefault("ready_timeout", self.ut.ready_s)
        if self.ut.options:
            kwargs.setdefault("backend_options", dict(self.ut.options))
        run: RunningProgram = self._launch(source, self.ut.name, **kwargs)
        return run

    def node_pids(self, run: RunningProgram) -> set[int]:
        """The pids of the run's nodes now (their current attempts)."""
        return {s.pid for s in run.status() if s.pid}

    def kill(self, pid: int) -> None:
        """End one node's process at once (SIGKILL)."""
        if self.ut.kill is not None:
            self.ut.kill(pid)
        else:
            os.kill(pid, signal.SIGKILL)

    def still_running(self, pids: Iterable[int], timeout: float = 20.0) -> list[int]:
        """The ``pids`` (node processes) still running after up to ``timeout``."""
        pids = set(pids) - {os.getpid()}  # threads: the nodes ran in this process
        if self.ut.gone is not None:
            return self.ut.gone(pids, timeout)
        return wait_gone(pids, timeout) if self.ut.pids_local else []

    def assert_nothing_left(
        self, run: RunningProgram | None = None, pids: Iterable[int] = (), local: Iterable[int] = ()
    ) -> None:
        """Once the run ended: none of the node processes ``pids`` (and the run's nodes'
        last ones) runs, nor the processes of this machine ``local`` (a launcher, and the
        run's helpers), and nothing is left on the backend's hosts."""
        nodes, here = set(pids), set(local)
        if run is not None:
            nodes |= self.node_pids(run)
            here |= run.pids()
        left = self.still_running(nodes) + wait_gone(here - {os.getpid()}, 20)
        assert not left, f"processes left behind: {left}"
        if self.ut.leftovers is not None:
            found = self.ut.leftovers(15.0)
            assert not found, f"left on the {self.ut.name} backend's hosts: {found}"

    # -- the command line -----------------------------------------------------------
    def env(self) -> dict[str, str]:
        """The environment of the ``topo`` commands: this code first on the path, no
        colours, wide lines, a run index of the test's own (``topo ps``)."""
        extra = dict(self.ut.env)
        path = [str(CODE_ROOT), *filter(None, [extra.pop("PYTHONPATH", "")])]
        return {
            **os.environ,
            **extra,
            "PYTHONPATH": os.pathsep.join(path),
            "NO_COLOR": "1",
            "COLUMNS": "200",
            "TOPO_HOME": str(self.tmp / ".topo-home"),
        }

    def topo(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """``topo ARGS`` as a user types it, in the test's folder."""
        return subprocess.run(
            [sys.executable, "-m", "topo", *args],
            cwd=self.tmp,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def run_args(self, path: Path, *extra: str) -> list[str]:
        """``run PATH -b NAME FLAGS EXTRA``: the arguments of ``topo run`` on the backend."""
        return ["run", str(path), "-b", self.ut.name, *self.ut.flags, *extra]

    def detached(self, *args: str) -> tuple[str, Path]:
        """``topo ARGS -d`` (a ``topo run``): the run's id and directory, once it is up."""
        done = self.topo(*args, "-d", timeout=240)
        assert done.returncode == 0, done.stdout + done.stderr
        run_id, run_dir = done.stdout.split()
        return run_id, Path(run_dir)


def status(run_dir: Path) -> dict[str, Any]:
    """The run's status record (``status.json`` in its directory)."""
    data: dict[str, Any] = json.loads((run_dir / STATUS_FILE).read_text())
    return data


def log_of(run_dir: Path, node: str) -> str:
    """Node ``node``'s log file in ``run_dir`` so far ("" before it exists)."""
    path = log_path(run_dir, node)
    return path.read_text(errors="replace") if path.is_file() else ""
