"""The topo agent of one Ray node: a Ray actor that forks the run's executables on its
node from topo's fork server (``topo.backends.forkserver``, as the procs and ssh
backends do), instead of one Ray worker process per executable.

Imported in Ray worker processes. ``__init__`` starts the fork server (a fresh
interpreter in its own session, which imports the targets once) with the program;
``spawn`` forks executables, ``take_program`` makes the ones forked from then on run a
program ``topo apply`` changed, ``kill`` ends one with its process group, ``stacks`` has
one dump its threads' stacks into its log, ``poll`` answers what happened since the
last poll (the agent's pids, ``server`` with import errors, ``started``, ``exited``,
``server_ended``) and the new complete lines of the executables' log files (kept in a
directory of this node, under ``actor.local_log_root``) and of the fork server's own
output (``OWN_LOG``); ``shutdown`` ends everything.

The fork server watches this actor's process (stdin EOF, its pid): when the actor dies
-- ``ray.kill``, a crash, or with its Ray node -- the executables end with it (their
process groups and what they left; Ray also ends every process below a dead worker), and
the launcher hears of it from Ray. An agent killed that way cannot remove its directory:
each agent marks its own (``MARK``) and removes those of agents that are gone when it
starts (``sweep_stale``). The actor is threaded, so ``poll`` waits for news while the
other calls are served.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from topo.backends.forkserver import write_msg
from topo.backends.grant_pipe import write_spawn
from topo.backends.proctree import kill_tree
from topo.backends.ray.actor import local_log_root, prepare_paths
from topo.backends.ray.pull import PullTail
from topo.rundir.layout import FORKSERVER_LOG, LOGS_DIR, exe_output_path, log_path

SERVER_EXIT_S = 10.0  # at shutdown the fork server ends its executables within this
MARK = "agent"  # in an agent's directory: who it is, so a later agent knows it is gone
OWN_LOG = ":agent"  # the label of the fork server's own output (no node id has a colon)


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


def how_it_ended(code: int | None) -> str:
    """A process's exit status for people."""
    if code is None:
        return "stopped answering"
    if code < 0:
        try:
            return f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"was killed by signal {-code}"
    return f"exited with code {code}"


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

        from topo.ir import loads

        paths = prepare_paths(init)
        self.ip = str(ray.util.get_node_ip_address())
        self.dir = local_log_root(init["registry"]["program_id"]) / subdir
        make_own_dir(self.dir)
        self.tail = PullTail()
        self._news: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._pids: dict[tuple[str, int], int] = {}
        self._killed: set[tuple[str, int]] = set()
        self._lock = threading.Lock()  # _pids and _killed
        self._writing = threading.Lock()  # the fork server's stdin
        self._start_server(init, paths)  # first: its imports take the longest
        self.program = loads(init["program_json"])
        threading.Thread(target=self._relay, name="topo-agent-status", daemon=True).start()
        sweep_stale(self.dir.parent.parent)  # what agents killed with their runs left

    def _start_server(self, init: dict[str, Any], paths: list[str]) -> None:
        """Start the fork server and send it the run (raises, with what it said, if it
        ended before it took it)."""
        registry = dict(init["registry"])
        registry["bind_host"] = self.ip  # nodes bind this Ray node's address
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self._status = mine
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in paths if p))
        own_log = self.dir / FORKSERVER_LOG
        self.tail.follow(OWN_LOG, own_log, from_end=False)
        with open(own_log, "ab") as log:
            try:
                self.server = subprocess.Popen(
                    [sys.executable, "-m", "topo.backends.forkserver", str(theirs.fileno())],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=log,
                    pass_fds=[theirs.fileno()],
                    start_new_session=True,
                    env=env,
                )
            finally:
                theirs.close()
        assert self.server.stdin is not None
        self._server_in = self.server.stdin.fileno()
        self._say(t="agent", pid=os.getpid(), server_pid=self.server.pid, ip=self.ip)
        run = {
            "program_json": init["program_json"],
            "registry": registry,
            "run_dir": self.dir,
            "launcher_pid": os.getpid(),  # the fork server and children watch the agent
            "disable_run": init["disable_run"],
            "modules": init["modules"],
            "sys_path": paths,
            "pythonpath": env["PYTHONPATH"],
            "devices_assigned": True,  # cpus/gpus are counts on Ray, not core ids
            "exe_env": _threads_env(init.get("threads", {})),
        }
        try:  # waits while the server imports: it reads the run once warmed up
            write_msg(self._server_in, run)
        except OSError:
            self.server.wait(5)
            said = own_log.read_text(errors="replace").strip().splitlines()[-3:]
            raise RuntimeError(
                f"topo's fork server {how_it_ended(self.server.poll())} before it took "
                f"the run: {' / '.join(said) or 'it said nothing'}"
            ) from None

    def _say(self, **msg: Any) -> None:
        with self._cond:
            self._news.append(msg)
            self._cond.notify_all()

    def _relay(self) -> None:
        """The fork server's datagrams, kept for the next ``poll``."""
        self._status.settimeout(0.2)
        while True:
            try:
                data = self._status.recv(1 << 20)
            except TimeoutError:
                code = self.server.poll()
                if code is not None:
                    self._say(t="server_ended", how=how_it_ended(code))
                    return
                continue
            except OSError:
                return
            msg = json.loads(data)
            key = (msg.get("exe"), msg.get("attempt"))
            with self._lock:
                if msg.get("t") == "started":
                    self._pids[key] = msg["pid"]
                    if key in self._killed:  # killed before it was forked
                        kill_tree(msg["pid"])
                elif msg.get("t") == "exited":
                    self._pids.pop(key, None)
                    self._killed.discard(key)
            self._say(**msg)

    # -- calls from the launcher ----------------------------------------------------
    def spawn(self, attempts: list[tuple[str, int, str]]) -> None:
        """Fork these attempts of executables, each with its grant (its rights); their
        output is followed from now on."""
        for exe, attempt, grant in attempts:
            nodes = self.program.executable_index[exe].nodes
            for n in nodes:
                self.tail.follow(n, log_path(self.dir, n))
            if len(nodes) > 1:
                path = exe_output_path(self.dir, self.program.executable_index[exe])
                self.tail.follow(exe, path)
            with self._lock:
                stopped = (exe, attempt) in self._killed
                self._killed.discard((exe, attempt))
            if stopped:  # stopped before it started
                self._say(t="exited", exe=exe, attempt=attempt, pid=0, code=-9)
                continue
            try:
                with self._writing:
                    if self._server_in < 0:
                        return  # shut down
                    write_spawn(self._server_in, exe, attempt, grant)
            except OSError:
                return  # the fork server is gone: _relay says so

    def take_program(self, program_json: str, modules: list[str], threads: dict[str, int]) -> bool:
        """``topo apply`` changed the program: executables forked from now on run this one
        (the fork server imports its new target modules first; ``threads``: the
        executables' ``OMP_NUM_THREADS``, as at the start). False once shut down."""
        from topo.ir import loads

        program = loads(program_json)
        more = {"exe_env": _threads_env(threads)}
        with self._writing:
            if self._server_in < 0:
                return False
            write_msg(self._server_in, ("program", program_json, modules, more))
            self.program = program  # (the spawns that follow look their executables up here)
        return True

    def kill(self, exe: str, attempt: int) -> None:
        """SIGKILL the attempt's process group (at once, or as soon as it is forked)."""
        with self._lock:
            pid = self._pids.get((exe, attempt))
            if not pid:
                self._killed.add((exe, attempt))
        if pid:
            kill_tree(pid)

    def stacks(self, exe: str, attempt: int) -> bool:
        """Have the attempt dump its threads' stacks into its log; whether it could."""
        pid = self._pids.get((exe, attempt))
        if not pid:
            return False
        try:
            os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            return False
        return True

    def poll(self, wait_s: float) -> dict[str, Any]:
        """What happened since the last poll (waiting up to ``wait_s`` for something), and
        the new complete lines of the logs (read after the news: an executable's last
        lines come with its exit)."""
        with self._cond:
            if not self._news:
                self._cond.wait(wait_s)
            news, self._news = self._news, []
        return {"news": news, "logs": self.tail.read()}

    def shutdown(self) -> dict[str, str]:
        """End the fork server (it kills its executables first) and answer the logs'
        last lines; the node-local files are removed."""
        with self._writing:
            self._server_in = -1
            try:
                assert self.server.stdin is not None
                self.server.stdin.close()  # EOF: the server ends its children, then itself
            except OSError:
                pass
        try:
            self.server.wait(SERVER_EXIT_S)
        except subprocess.TimeoutExpired:
            kill_tree(self.server.pid)  # its session's group: it started one
            self.server.wait(5)
        with self._lock:
            for pid in self._pids.values():
                kill_tree(pid)
        logs = self.tail.read(final=True)
        self.tail.close()
        shutil.rmtree(self.dir, ignore_errors=True)
        for empty in (self.dir.parent, self.dir.parent.parent):  # the run's, then topo's
            try:
                empty.rmdir()
            except OSError:  # another agent's (of this run or another) is still there
                break
        return logs
