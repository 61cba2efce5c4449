"""What every remote backend's agent does on its host: start topo's fork server, hand
it the run and then each executable with its grant, relay what it reports, follow the
executables' logs, kill them, have them dump their stacks, and end everything.

``HostCore`` is the same whatever carries the agent's messages (the stream agent of
ssh, a Ray actor): its owner passes ``say`` (where the fork server's reports go:
``hello``, ``server``, ``started``, ``exited``) and ``on_server_end`` (the fork server
ended by itself), calls ``spawn``, ``take_program``, ``kill``, ``stacks`` and
``read_logs`` as its launcher asks, and ``stop`` at the end -- its launcher's
request, or the loss of its launcher. The fork server is the ``procs`` backend's
(``topo.backends.forkserver``): a remote executable gets exactly the child set-up of
a local one, and the fork server and its children watch this process (stdin EOF, its
pid), so they end with the agent whatever ends it.

Imports the standard library and the fork server's small helpers only; the IR and the
log naming when it is made (after the agent said hello).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from topo.backends.forkserver import write_msg
from topo.backends.grant_pipe import write_spawn
from topo.backends.proctree import how_it_ended, kill_tree
from topo.backends.remote.follow import SERVER_LOG, LogFollower
from topo.rundir.layout import FORKSERVER_LOG, exe_output_path, log_path

STATUS_BUFFER = 4 << 20  # the fork server's reports wait here while the relay is busy


class HostCore:
    """One agent's fork server and executables (see the module's docstring)."""

    def __init__(
        self,
        init: Mapping[str, Any],
        run_dir: Path,
        bind_host: str,
        say: Callable[..., None],
        on_server_end: Callable[[str], None],
        *,
        env: Mapping[str, str] | None = None,
        extra: Mapping[str, Any] | None = None,
        chunk: int | None = None,
    ) -> None:
        """Start the fork server in ``run_dir`` and send it the run ``init`` (the
        launcher's: program, registry, modules, ``disable_run``) with ``extra`` keys;
        the nodes bind ``bind_host``. Raises ``RuntimeError``, with what the fork server
        said, when it ended before it took the run."""
        from topo.ir import loads

        self._loads = loads
        self.run_dir = run_dir
        self.bind_host = bind_host
        self.follower = LogFollower(chunk)
        self._say = say
        self._on_server_end = on_server_end
        self._pids: dict[tuple[str, int], int] = {}
        self._killed: set[tuple[str, int]] = set()  # kills asked for before the fork
        self._lock = threading.Lock()  # _pids and _killed
        self._writing = threading.Lock()  # the fork server's stdin
        self._start_server(init, env, extra or {})  # first: its imports take the longest
        self.program = loads(init["program_json"])
        self._say(t="hello", pid=os.getpid(), server_pid=self.server.pid)
        threading.Thread(target=self._relay, name="topo-agent-status", daemon=True).start()

    def _start_server(
        self, init: Mapping[str, Any], env: Mapping[str, str] | None, extra: Mapping[str, Any]
    ) -> None:
        registry = dict(init["registry"])
        registry["bind_host"] = self.bind_host  # the nodes bind this host's own address
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, STATUS_BUFFER)
        self._status = mine
        own_log = self.run_dir / FORKSERVER_LOG
        with open(own_log, "ab") as log:
            # Followed from its end: what is there came from an earlier agent of this host.
            self.follower.follow(SERVER_LOG, own_log)
            try:
                self.server = subprocess.Popen(
                    [sys.executable, "-m", "topo.backends.forkserver", str(theirs.fileno())],
                    stdin=subprocess.PIPE,
                    stdout=log,
                    stderr=log,
                    pass_fds=[theirs.fileno()],
                    start_new_session=True,
                    env=None if env is None else dict(env),
                )
            finally:
                theirs.close()
        assert self.server.stdin is not None
        self._server_in = self.server.stdin.fileno()
        run = {
            "program_json": init["program_json"],
            "registry": registry,
            "run_dir": self.run_dir,
            "launcher_pid": os.getpid(),  # the fork server and children watch this agent
            "disable_run": init.get("disable_run", False),
            "modules": init.get("modules", []),
            "accelerator_ids": init.get("accelerator_ids", {}),
            **extra,
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

    def _relay(self) -> None:
        """The fork server's reports to ``say``, noting the executables' pids; a kill
        asked for before the fork is carried out as the pid comes."""
        self._status.settimeout(0.2)
        while True:
            try:
                data = self._status.recv(1 << 20)
            except TimeoutError:
                code = self.server.poll()
                if code is not None:
                    self._on_server_end(how_it_ended(code))
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

    # -- what the launcher asks ---------------------------------------------------
    def spawn(self, exe: str, attempt: int, grant: str) -> bool:
        """Fork ``attempt`` of ``exe`` with its grant (its rights, passed on to the fork
        server, not kept here); its output is followed from now on. False once the fork
        server is gone or stopped."""
        nodes = self.program.executable_index[exe].nodes
        for n in nodes:
            self.follower.follow(n, log_path(self.run_dir, n))
        if len(nodes) > 1:
            self.follower.follow(
                exe, exe_output_path(self.run_dir, self.program.executable_index[exe])
            )
        with self._lock:
            stopped = (exe, attempt) in self._killed
            self._killed.discard((exe, attempt))
        if stopped:  # stopped before it started
            self._say(t="exited", exe=exe, attempt=attempt, pid=0, code=-9)
            return True
        try:
            with self._writing:
                if self._server_in < 0:
                    return False
                write_spawn(self._server_in, exe, attempt, grant)
        except OSError:
            return False  # the fork server is gone: the relay says so
        return True

    def take_program(
        self, program_json: str, modules: list[str], more: Mapping[str, Any] | None = None
    ) -> bool:
        """``topo apply`` changed the program: executables forked from now on run this one
        (the fork server imports its new target modules first; ``more``: run keys that
        change with it). False once the fork server is stopped."""
        program = self._loads(program_json)
        with self._writing:
            if self._server_in < 0:
                return False
            write_msg(self._server_in, ("program", program_json, modules, dict(more or {})))
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
        with self._lock:
            pid = self._pids.get((exe, attempt))
        if not pid:
            return False
        try:
            os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            return False
        return True

    def read_logs(self, final: bool = False) -> dict[str, str]:
        """Label -> the new complete lines of its log (``LogFollower.read``)."""
        return self.follower.read(final)

    def stop(self, wait_s: float) -> dict[str, str]:
        """End the fork server (at stdin EOF it kills its executables and their groups,
        then itself; after ``wait_s`` it is killed) and every executable left; the logs'
        last lines."""
        with self._writing:
            self._server_in = -1
            try:
                assert self.server.stdin is not None
                self.server.stdin.close()
            except OSError:
                pass
        try:
            self.server.wait(wait_s)
        except subprocess.TimeoutExpired:
            kill_tree(self.server.pid)  # its session's group: it started one
            try:
                self.server.wait(5)
            except subprocess.TimeoutExpired:
                pass
        with self._lock:
            pids = list(self._pids.values())
        for pid in pids:
            kill_tree(pid)
        logs = self.follower.read(final=True)
        self.follower.close()
        return logs
