"""The ``procs`` backend (default): one OS process per executable, forked from a
pre-warmed fork server (see ``forkserver``) instead of a fresh interpreter per node.

``warm_up`` starts the fork server before the program is known, so its imports
(topo's runtime, numpy, zmq) overlap with the launcher compiling the file; ``open``
then sends it the program (and the import paths the compile added). This module
imports little, so picking the backend does not wait for the runtime.

The launcher keeps no zmq state in common with the children: the fork server
is a separate, import-only process, so ``topo.launch(..., backend="procs")``
also works from a process (e.g. pytest) that has zmq contexts and threads.
The fork server reports the processes (started, exited with a code); the
nodes in them report their status over the program's registry.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from topo.backends.base import Backend, ExecutableRunner, JobContext, Sink
from topo.backends.device_plan import MachineDevices, format_assignment, init_ids, on_this_machine
from topo.backends.forkserver import write_msg
from topo.backends.grant_pipe import write_spawn
from topo.backends.grants import exe_grant
from topo.backends.logs import file_size, wait_written, write_marker
from topo.backends.proctree import how_it_ended, kill_tree
from topo.diagnostics import Diagnostic
from topo.ir import Program, dumps
from topo.rundir.layout import FORKSERVER_LOG, exe_output_path, log_name
from topo.targets import TargetInfo

CHECK_TIMEOUT_S = 110.0  # a new program's imports (TensorFlow's alone take seconds)


class _ProcRunner(ExecutableRunner):
    def __init__(self, exe: str, attempt: int, output: Path | None = None) -> None:
        self.exe = exe
        self.attempt = attempt
        self.pid = 0
        self.output = output  # the file its fds 1 and 2 write to (the stack dump lands there)
        self.server: _Server | None = None  # the fork server asked to start it
        self._lock = threading.Lock()
        self._kill_asked = False

    def forked(self, pid: int) -> None:
        """The fork server started it as ``pid`` (killed at once if that was asked)."""
        with self._lock:
            self.pid = pid
            kill = self._kill_asked
        if kill:
            kill_tree(pid)

    def kill(self) -> None:
        # Never waits: a pid not known yet is killed when it is (a lost one never is).
        with self._lock:
            pid = self.pid
            self._kill_asked = not pid
        if pid:
            kill_tree(pid)

    def dump_stacks(self, node: str) -> str:
        # The child set-up registered faulthandler on SIGUSR1: the dump goes to its log.
        if not self.pid:
            return ""
        before = file_size(self.output)
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return ""
        wait_written(self.output, before)  # the dump is in the file before the kill follows
        return f"(the stacks of its threads are in its log, {log_name(node)})"


class _Server:
    """One fork server process: its stdin (requests), status socket (reports), the
    temporary file of its output until it has the run directory, and whether it said
    it is ready (``server``) or was found dead."""

    def __init__(self) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.early: Any = tempfile.TemporaryFile()
        self.env = _server_env()
        self.cwd = os.getcwd()
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "topo.backends.forkserver", str(theirs.fileno())],
                stdin=subprocess.PIPE,
                stdout=self.early,
                stderr=self.early,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
                env=self.env,
                cwd=self.cwd,
            )
        except BaseException:
            mine.close()
            self.early.close()
            raise
        finally:
            theirs.close()
        self.sock = mine
        self.pid = self.popen.pid
        self.ready = False
        self.dead = False
        self.reader: threading.Thread | None = None

    def send(self, msg: Any) -> bool:
        """Write one request; False if the server is gone (its pipe is broken)."""
        assert self.popen.stdin is not None
        try:
            write_msg(self.popen.stdin.fileno(), msg)
        except (BrokenPipeError, ValueError):
            return False
        return True

    def spawn(self, exe: str, attempt: int, grant: str) -> bool:
        """Ask for executable ``exe`` with its ``grant``; False if the server is gone."""
        assert self.popen.stdin is not None
        try:
            write_spawn(self.popen.stdin.fileno(), exe, attempt, grant)
        except (BrokenPipeError, ValueError):
            return False
        return True

    def how_it_ended(self) -> str:
        return how_it_ended(self.popen.poll())

    def close(self) -> None:
        """End it (if it still runs) and release its pipe, socket and temporary file."""
        if self.popen.poll() is None:  # never signal a pid that was reaped (and reusable)
            kill_tree(self.pid)
        if self.popen.stdin is not None:
            try:
                self.popen.stdin.close()
            except OSError:
                pass
        self.popen.wait()
        self.sock.close()
        self.early.close()


class ProcsBackend(Backend):
    """Executables as processes forked from a per-run fork server.

    A fork server that dies during the run takes its executables with it: they are
    reported lost (their restart policies apply) and the next start brings up a new
    server with the same program. One that dies before it is ready fails the run."""

    name = "procs"

    def __init__(self) -> None:
        self._sink: Sink | None = None
        self._server: _Server | None = None
        self._dead: list[_Server] = []  # servers found dead (closed with the backend)
        self._runners: dict[tuple[str, int], _ProcRunner] = {}
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self.import_errors: list[str] = []
        self._opened = False
        self._failed = False
        self._closing = False  # close() began: a server ending now is no failure
        self._job: JobContext | None = None
        self._init: dict[str, Any] | None = None
        self._log: Path | None = None
        self._check_lock = threading.Lock()
        self._checked: queue.Queue[Any] | None = None  # where the reader hands a check's answer
        self.devices = MachineDevices()  # which executable gets which accelerator

    @property
    def server_pid(self) -> int | None:
        """The pid of the current fork server (None before it starts)."""
        return None if self._server is None else self._server.pid

    def warm_up(self) -> bool:
        if self._server is None and not self._opened:
            self._server = _Server()
        return True

    def describe_targets(
        self, targets: list[str], source: str | None
    ) -> dict[str, TargetInfo | str] | None:
        """The fork server imports the targets (it needs them anyway) and describes them:
        before the run, the warmed-up one; during it (``topo apply``), the running one.
        None without a server or if it could not say."""
        if self._opened:
            return self._describe_running(targets, source)
        server = self._server
        if server is None or not server.send(("check", targets, source)):
            return None
        sock = server.sock
        sock.settimeout(0.2)
        try:
            while True:
                try:
                    data = sock.recv(1 << 20)
                except TimeoutError:
                    data = b""
                if not data:  # (as in _read)
                    if server.popen.poll() is not None:
                        return None  # it died: open() starts another one
                    continue
                msg = json.loads(data)
                if msg.get("t") == "checked":
                    break
        finally:
            sock.settimeout(None)
        return _described(msg.get("targets"))

    def _describe_running(
        self, targets: list[str], source: str | None
    ) -> dict[str, TargetInfo | str] | None:
        """The running fork server's description of ``targets`` (its reader hands the
        answer over); None if it is gone or did not answer in ``CHECK_TIMEOUT_S``."""
        with self._check_lock:  # one at a time: the answer carries no request id
            answers: queue.Queue[Any] = queue.Queue()
            with self._lock:
                server = self._server
                if server is None or server.dead or not server.ready:
                    return None
                self._checked = answers
                if not server.send(("check", targets, source)):
                    return None
            end = time.monotonic() + CHECK_TIMEOUT_S
            try:
                while True:
                    try:
                        return _described(answers.get(timeout=0.2))
                    except queue.Empty:
                        if server.dead or self._closing or time.monotonic() > end:
                            return None
            finally:
                self._checked = None

    def _discard(self) -> None:
        """End a fork server that was never sent a program (it has no children)."""
        server, self._server = self._server, None
        if server is not None:
            server.close()

    def open(self, job: JobContext, sink: Sink) -> None:
        from topo.backends.worker import target_modules

        self._sink = sink
        self._job = job
        env = _server_env()  # the import paths as they are now that the program compiled
        server = self._server
        if server is not None and (
            server.popen.poll() is not None
            or (server.cwd, _without_path(server.env)) != (os.getcwd(), _without_path(env))
        ):
            self._discard()  # warmed up for another directory or environment
        if self._server is None:
            self._server = _Server()
        self._log = Path(job.run_dir) / FORKSERVER_LOG
        self._init = {
            "program_json": dumps(job.program),
            "registry": vars(job.registry).copy(),
            "run_dir": job.run_dir,
            "log_limit": job.options.log_limit,
            "launcher_pid": job.launcher_pid,
            "disable_run": job.options.disable_run,
            "modules": target_modules(job.program),
            "log": str(self._log),
            # Import roots found since the server started (e.g. beside the topology file).
            "sys_path": [os.getcwd(), *sys.path],
            "pythonpath": env["PYTHONPATH"],
            "accelerator_ids": init_ids(self.devices.assigned),
        }
        self._opened = True
        self._begin(self._server)

    def _begin(self, server: _Server) -> None:
        """Send ``server`` the program and start reading its reports."""
        server.send(self._init)
        server.reader = threading.Thread(
            target=self._read, args=(server,), name="topo-procs-status", daemon=True
        )
        server.reader.start()

    can_update = True

    def update(self, program: Program) -> None:
        """The fork server takes the new program (and imports its new target modules):
        the executables forked from now on run it; the running ones go on."""
        from dataclasses import replace

        from topo.backends.worker import target_modules

        assert self._job is not None and self._init is not None
        with self._lock:
            self._job = replace(self._job, program=program)
            self._init["program_json"] = dumps(program)
            self._init["modules"] = target_modules(program)
            self._init["accelerator_ids"] = self.devices.take_update()
            server = self._server
            if server is not None and not server.dead:  # (a new server gets the new _init)
                devices = {"accelerator_ids": self._init["accelerator_ids"]}
                message = ("program", self._init["program_json"], self._init["modules"], devices)
                server.send(message)

    @classmethod
    def placement_text(cls, program: Program, **options: Any) -> str | None:
        """The accelerators of this machine each executable would get."""
        return format_assignment(program, on_this_machine(program)) or None

    def check(self, program: Program) -> list[Diagnostic]:
        return self.devices.check(program)  # (the accelerators asked for: device_plan)

    def check_update(self, program: Program) -> list[Diagnostic]:
        return self.devices.check_update(program)

    @property
    def accelerators(self) -> dict[str, Any]:
        """Executable -> the devices it was given (for the views)."""
        return dict(self.devices.assigned)

    def helper_pids(self) -> list[int]:
        return [] if self._server is None else [self._server.pid]

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        job = self._job
        output = None
        if job is not None:
            output = exe_output_path(job.run_dir, job.program.executable_index[exe])
        runner = _ProcRunner(exe, attempt, output)
        with self._lock:
            server = self._live_server()
            if server is not None:
                runner.server = server
                self._runners[(exe, attempt)] = runner
                # A server that died meanwhile cannot take it (broken pipe): its reader
                # finds it dead and reports this attempt lost with its others.
                assert job is not None
                server.spawn(exe, attempt, exe_grant(job, exe).to_json())
        if server is None:  # no fork server could be started: the run has failed
            assert self._sink is not None
            self._sink.exited(exe, attempt, 0, -9, "was not started: the fork server is gone")
        return runner

    def _live_server(self) -> _Server | None:
        """The fork server to send spawns to: a new one (sent the program) in place of a
        server that died; None if the run failed or a new one cannot be started."""
        server = self._server
        if server is not None and not server.dead:
            return server
        if self._failed or self._closing or self._init is None:
            return None
        try:
            server = self._server = _Server()
        except OSError as exc:
            self._fail(f"a new fork server could not be started: {exc}")
            return None
        if self._log is not None:
            write_marker(self._log, f"a new fork server starts (pid {server.pid})")
        self._begin(server)
        return server

    def _read(self, server: _Server) -> None:
        assert self._sink is not None
        sink = self._sink
        sock = server.sock
        sock.settimeout(0.2)
        while not self._closed.is_set():
            try:
                data = sock.recv(1 << 20)
            except TimeoutError:
                data = b""
            except OSError:
                return
            if not data:  # nothing (some kernels read the server's end closing so)
                if server.popen.poll() is not None:
                    self._lost(server)
                    return
                continue
            msg = json.loads(data)
            t = msg.get("t")
            if t == "started":
                runner = self._runners.get((msg["exe"], msg["attempt"]))
                if runner is not None and runner.server is server:
                    runner.forked(msg["pid"])
                sink.started(msg["exe"], msg["attempt"], msg["pid"])
            elif t == "exited":
                with self._lock:
                    self._runners.pop((msg["exe"], msg["attempt"]), None)
                code = msg["code"]
                sink.exited(msg["exe"], msg["attempt"], msg["pid"], -9 if code is None else code)
            elif t == "server":
                server.ready = True
                self.import_errors = msg.get("import_errors", [])
            elif t == "checked":
                answers = self._checked
                if answers is not None:
                    answers.put(msg.get("targets"))

    def _lost(self, server: _Server) -> None:
        """``server`` died: its executables died with it (``PR_SET_PDEATHSIG``). They are
        reported lost (their restart policies bring them back in a new server); a server
        that died before it was ready fails the run instead."""
        assert self._sink is not None
        with self._lock:
            if server.dead:
                return
            server.dead = True
            self._dead.append(server)
            lost = [r for r in self._runners.values() if r.server is server]
            for r in lost:
                del self._runners[(r.exe, r.attempt)]
        how = f"the fork server (pid {server.pid}) {server.how_it_ended()}"
        where = f"see {self._log}" if self._log is not None else f"see {FORKSERVER_LOG}"
        if self._closing:
            pass
        elif not server.ready:
            self._keep_early_output(server)
            self._fail(f"{how} before it was ready; {where}")
        elif self._log is not None:
            write_marker(self._log, f"{how}; its executables were lost")
        for runner in lost:
            if runner.pid:  # what the executable started, in its process group
                kill_tree(runner.pid)
            self._sink.exited(
                runner.exe, runner.attempt, runner.pid, -9, f"was lost: {how} ({where})"
            )

    def _fail(self, message: str) -> None:
        """The run cannot go on on this backend: say why (once)."""
        assert self._sink is not None
        if not self._failed:
            self._failed = True
            self._sink.backend_failed(message)

    def close(self) -> None:
        if not self._opened:  # warmed up, but the run never started
            self._discard()
            return
        self._closing = True
        server = self._server
        if server is not None and not server.dead:
            server.send(("shutdown",))
            try:
                assert server.popen.stdin is not None
                server.popen.stdin.close()
            except OSError:
                pass
            try:
                server.popen.wait(10)
            except subprocess.TimeoutExpired:
                kill_tree(server.pid)
                server.popen.wait(5)
        self._closed.set()
        servers = {id(s): s for s in [*self._dead, *([server] if server else [])]}
        for each in servers.values():
            if each.reader is not None:
                each.reader.join(2)
            self._keep_early_output(each)
            each.close()

    def _keep_early_output(self, server: _Server) -> None:
        """A server that ended before it took the program wrote only to its temporary
        file: that goes to ``forkserver.log`` (which the server makes when it takes it)."""
        if self._log is None:
            return
        try:
            server.early.seek(0)
            early = server.early.read()
            known = self._log.read_bytes() if self._log.exists() else b""
            if early and early not in known:
                with self._log.open("ab") as out:
                    out.write(early)
        except (OSError, ValueError):
            pass


def _described(found: Any) -> dict[str, TargetInfo | str] | None:
    """A fork server's ``checked`` answer as ``TargetInfo`` (or why one does not import)."""
    if not isinstance(found, dict):
        return None
    return {t: v if isinstance(v, str) else TargetInfo.from_json(v) for t, v in found.items()}


def _server_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.getcwd(), *sys.path] if p)
    return env


def _without_path(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k != "PYTHONPATH"}
