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
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

from topo.backends.base import Backend, ExecutableRunner, JobContext, Sink
from topo.backends.forkserver import kill_tree, write_msg
from topo.backends.logs import exe_output_path, file_size, wait_written
from topo.ir import dumps


class _ProcRunner(ExecutableRunner):
    def __init__(self, exe: str, attempt: int, output: Path | None = None) -> None:
        self.exe = exe
        self.attempt = attempt
        self.pid = 0
        self.known = threading.Event()
        self.output = output  # the file its fds 1 and 2 write to (the stack dump lands there)

    def kill(self) -> None:
        if self.known.wait(5) and self.pid:
            kill_tree(self.pid)

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
        from topo.backends.logs import safe_name

        return f"(the stacks of its threads are in its log, logs/{safe_name(node)}.log)"


class ProcsBackend(Backend):
    """Executables as processes forked from a per-run fork server."""

    name = "procs"

    def __init__(self) -> None:
        self._sink: Sink | None = None
        self._server: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._runners: dict[tuple[str, int], _ProcRunner] = {}
        self._lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._closed = threading.Event()
        self.server_pid: int | None = None
        self.import_errors: list[str] = []
        self._opened = False
        self._job: JobContext | None = None
        self._spawned_as: tuple[str, dict[str, str]] | None = None
        self._early: Any = None  # the server's output until it has the run directory
        self._log: Path | None = None

    def warm_up(self) -> bool:
        if self._server is None and not self._opened:
            self._spawn()
        return True

    def _server_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in [os.getcwd(), *sys.path] if p)
        return env

    def _spawn(self) -> None:
        """Start the fork server; its output goes to a temporary file until ``open`` names
        the run directory (the server then moves it into ``forkserver.log``)."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        out = self._early = tempfile.TemporaryFile()
        env = self._server_env()
        try:
            self._server = subprocess.Popen(
                [sys.executable, "-m", "topo.backends.forkserver", str(theirs.fileno())],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=out,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
                env=env,
                cwd=os.getcwd(),
            )
        except BaseException:
            mine.close()
            out.close()
            self._early = None
            raise
        finally:
            theirs.close()
        self._sock = mine
        self._spawned_as = (os.getcwd(), _without_path(env))
        self.server_pid = self._server.pid

    def _discard(self) -> None:
        """End a fork server that was never sent a program (it has no children)."""
        server, sock = self._server, self._sock
        self._server = self._sock = None
        self.server_pid = None
        if self._early is not None:
            self._early.close()
            self._early = None
        if server is not None:
            if server.poll() is None:  # never signal a pid that was reaped (and reusable)
                kill_tree(server.pid)
            if server.stdin is not None:
                server.stdin.close()
            server.wait()
        if sock is not None:
            sock.close()

    def open(self, job: JobContext, sink: Sink) -> None:
        from topo.backends.worker import target_modules

        self._sink = sink
        self._job = job
        env = self._server_env()
        if self._server is not None and (
            self._server.poll() is not None or self._spawned_as != (os.getcwd(), _without_path(env))
        ):
            self._discard()  # warmed up for another directory or environment
        if self._server is None:
            self._spawn()
        self._log = Path(job.run_dir) / "forkserver.log"
        init = {
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
        }
        self._opened = True
        self._send(init)
        self._reader = threading.Thread(target=self._read, name="topo-procs-status", daemon=True)
        self._reader.start()

    def _send(self, msg: Any) -> None:
        assert self._server is not None and self._server.stdin is not None
        with self._lock:
            try:
                write_msg(self._server.stdin.fileno(), msg)
            except BrokenPipeError:  # the server died: the status reader reports it
                pass

    def helper_pids(self) -> list[int]:
        return [] if self.server_pid is None else [self.server_pid]

    def start(self, exe: str, attempt: int) -> ExecutableRunner:
        output = (
            None
            if self._job is None
            else exe_output_path(self._job.run_dir, self._job.program, exe)
        )
        runner = _ProcRunner(exe, attempt, output)
        self._runners[(exe, attempt)] = runner
        self._send(("spawn", exe, attempt))
        return runner

    def _read(self) -> None:
        assert self._sock is not None and self._sink is not None
        sink = self._sink
        self._sock.settimeout(0.2)
        while not self._closed.is_set():
            try:
                data = self._sock.recv(1 << 20)
            except TimeoutError:
                if self._server is not None and self._server.poll() is not None:
                    self._server_died()
                    return
                continue
            except OSError:
                return
            msg = json.loads(data)
            t = msg.get("t")
            if t == "started":
                runner = self._runners.get((msg["exe"], msg["attempt"]))
                if runner is not None:
                    runner.pid = msg["pid"]
                    runner.known.set()
                sink.started(msg["exe"], msg["attempt"], msg["pid"])
            elif t == "exited":
                self._runners.pop((msg["exe"], msg["attempt"]), None)
                code = msg["code"]
                sink.exited(msg["exe"], msg["attempt"], msg["pid"], -9 if code is None else code)
            elif t == "server":
                self.import_errors = msg.get("import_errors", [])

    def _server_died(self) -> None:
        """The fork server is gone: its children died with it (PDEATHSIG)."""
        assert self._sink is not None
        for (exe, attempt), runner in list(self._runners.items()):
            if runner.pid:
                kill_tree(runner.pid)
            self._sink.exited(
                exe, attempt, runner.pid, -9, "was lost: the fork server died (see forkserver.log)"
            )
        self._runners.clear()

    def close(self) -> None:
        if not self._opened:  # warmed up, but the run never started
            self._discard()
            return
        server = self._server
        if server is not None:
            try:
                self._send(("shutdown",))
                assert server.stdin is not None
                server.stdin.close()
            except (OSError, ValueError):
                pass
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                kill_tree(server.pid)
                server.wait(5)
        self._closed.set()
        if self._reader is not None:
            self._reader.join(2)
        if self._sock is not None:
            self._sock.close()
        self._keep_early_output()

    def _keep_early_output(self) -> None:
        """A server that ended before it took the program wrote only to its temporary
        file: that goes to ``forkserver.log`` (which the server makes when it starts)."""
        early, self._early = self._early, None
        if early is None:
            return
        try:
            if self._log is not None and not self._log.exists():
                early.seek(0)
                self._log.write_bytes(early.read())
        finally:
            early.close()


def _without_path(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k != "PYTHONPATH"}
