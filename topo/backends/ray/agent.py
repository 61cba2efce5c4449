"""The topo agent of one Ray node: a Ray actor that forks the run's executables on its
node from topo's fork server, instead of one Ray worker process per executable -- the
remote core's host side (``remote.host.HostCore``) behind Ray actor methods.

Imported in Ray worker processes. ``__init__`` starts the fork server (a fresh
interpreter in its own session, which imports the targets once) with the program, in a
directory of this node (under ``actor.local_log_root``); ``spawn``, ``take_program``,
``kill`` and ``stacks`` are the core's; ``poll`` answers what happened since the last
poll (``hello`` with the agent's pids, ``server`` with import errors, ``started``,
``exited``, ``server_ended``) and the new complete lines of the executables' logs and
of the fork server's own output; ``shutdown`` ends everything.

The fork server watches this actor's process (stdin EOF, its pid): when the actor dies
-- ``ray.kill``, a crash, or with its Ray node -- the executables end with it (their
process groups and what they left; Ray also ends every process below a dead worker), and
the launcher hears of it from Ray. An agent killed that way cannot remove its directory:
each agent marks its own (``MARK``) and removes those of agents that are gone when it
starts (``sweep_stale``). The actor is threaded, so ``poll`` waits for news while the
other calls are served.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

from topo.backends.ray.actor import local_log_root, prepare_paths
from topo.backends.remote.host import HostCore
from topo.rundir.layout import LOGS_DIR

SERVER_EXIT_S = 10.0  # at shutdown the fork server ends its executables within this
MARK = "agent"  # in an agent's directory: who it is, so a later agent knows it is gone


def _identity(pid: int) -> list[str]:
    """What tells process ``pid`` apart on this machine, now and after: pid, start time,
    pid namespace, boot."""
    import psutil

    with open("/proc/sys/kernel/random/boot_id") as f:
        boot = f.read().strip()
    pidns = os.stat("/proc/self/ns/pid").st_ino
    return [str(pid), repr(psutil.Process(pid).create_time()), str(pidns), boot]


def mark_owner(directory: Path) -> None:
    """Say in ``directory`` that this process owns it (written whole: a reader never
    sees half of it)."""
    tmp = directory / f".{MARK}.tmp"
    tmp.write_text(" ".join(_identity(os.getpid())))
    tmp.replace(directory / MARK)


def make_own_dir(directory: Path, tries: int = 5) -> None:
    """Make ``directory`` (and its ``logs``) and mark it as this process's. Another run's
    clean-up may remove an empty parent at the same moment (it removes ``topo-ray`` once
    it is empty): then it is made again."""
    for attempt in range(tries):
        try:
            (directory / LOGS_DIR).mkdir(parents=True, exist_ok=True, mode=0o700)
            mark_owner(directory)
            return
        except FileNotFoundError:
            if attempt == tries - 1:
                raise
            time.sleep(0.05 * (attempt + 1))


def sweep_stale(root: Path) -> list[Path]:
    """Remove the directories under ``root`` (``<run>/<agent>``) whose agent is gone:
    Ray ends a dead agent's processes at once (killed with its launcher, say), so nothing
    of it could remove them. Only what can be told for sure: an agent of an earlier boot,
    or of this pid namespace whose process is not there any more. The ones removed."""
    import psutil

    try:
        me = _identity(os.getpid())
    except OSError:
        return []
    removed = []
    for mark in sorted(root.glob(f"*/*/{MARK}")):
        try:
            pid, started, pidns, boot = mark.read_text().split()
            if boot == me[3] and pidns != me[2]:
                continue  # another pid namespace: its pids mean nothing here
            gone = boot != me[3] or abs(float(_identity(int(pid))[1]) - float(started)) > 0.5
        except (OSError, ValueError, psutil.AccessDenied):
            continue
        except psutil.NoSuchProcess:
            gone = True
        if gone:
            shutil.rmtree(mark.parent, ignore_errors=True)
            removed.append(mark.parent)
            try:
                mark.parent.parent.rmdir()
            except OSError:  # the run's other agents' directories are still there
                pass
    return removed


def _threads_env(threads: dict[str, int]) -> dict[str, dict[str, str]]:
    """Executable -> ``OMP_NUM_THREADS`` of its CPU count, as Ray sets it for an actor of
    that many CPUs (this agent asks for none, so Ray set 1 here), unless the node's own
    environment set it."""
    try:
        with open("/proc/self/environ", "rb") as f:  # as the raylet started this worker
            started_with = f.read().split(b"\0")
    except OSError:
        return {}
    if any(v.startswith(b"OMP_NUM_THREADS=") for v in started_with):
        return {}
    return {exe: {"OMP_NUM_THREADS": str(n)} for exe, n in threads.items()}


class NodeAgent:
    """The executables of one run on one Ray node (see the module's docstring)."""

    def __init__(self, init: dict[str, Any], subdir: str) -> None:
        import ray

        paths = prepare_paths(init)
        self.ip = str(ray.util.get_node_ip_address())
        self.dir = local_log_root(init["registry"]["program_id"]) / subdir
        make_own_dir(self.dir)
        self._news: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        pythonpath = os.pathsep.join(p for p in paths if p)
        self.core = HostCore(
            init,
            self.dir,
            self.ip,  # nodes bind this Ray node's address
            self._say,
            lambda how: self._say(t="server_ended", how=how),
            env=dict(os.environ, PYTHONPATH=pythonpath),
            extra={
                "sys_path": paths,
                "pythonpath": pythonpath,
                "devices_assigned": True,  # cpus/gpus are counts on Ray, not core ids
                "exe_env": _threads_env(init.get("threads", {})),
            },
        )
        sweep_stale(self.dir.parent.parent)  # what agents killed with their runs left

    def _say(self, **msg: Any) -> None:
        with self._cond:
            self._news.append(msg)
            self._cond.notify_all()

    # -- calls from the launcher ----------------------------------------------------
    def spawn(self, attempts: list[tuple[str, int, str]]) -> None:
        """Fork these attempts of executables, each with its grant (its rights); their
        output is followed from now on."""
        for exe, attempt, grant in attempts:
            if not self.core.spawn(exe, attempt, grant):
                return  # the fork server is gone (the news say so), or shut down

    def take_program(self, program_json: str, modules: list[str], threads: dict[str, int]) -> bool:
        """``topo apply`` changed the program: executables forked from now on run this one
        (the fork server imports its new target modules first; ``threads``: the
        executables' ``OMP_NUM_THREADS``, as at the start). False once shut down."""
        return self.core.take_program(program_json, modules, {"exe_env": _threads_env(threads)})

    def kill(self, exe: str, attempt: int) -> None:
        """SIGKILL the attempt's process group (at once, or as soon as it is forked)."""
        self.core.kill(exe, attempt)

    def stacks(self, exe: str, attempt: int) -> bool:
        """Have the attempt dump its threads' stacks into its log; whether it could."""
        return self.core.stacks(exe, attempt)

    def poll(self, wait_s: float) -> dict[str, Any]:
        """What happened since the last poll (waiting up to ``wait_s`` for something), and
        the new complete lines of the logs (read after the news: an executable's last
        lines come with its exit)."""
        with self._cond:
            if not self._news:
                self._cond.wait(wait_s)
            news, self._news = self._news, []
        return {"news": news, "logs": self.core.read_logs()}

    def shutdown(self) -> dict[str, str]:
        """End the fork server (it kills its executables first) and answer the logs'
        last lines; the node-local files are removed."""
        logs = self.core.stop(SERVER_EXIT_S)
        shutil.rmtree(self.dir, ignore_errors=True)
        for empty in (self.dir.parent, self.dir.parent.parent):  # the run's, then topo's
            try:
                empty.rmdir()
            except OSError:  # another agent's (of this run or another) is still there
                break
        return logs
