"""The per-host agent of the ``ssh`` backend: ``python -m topo.backends.ssh.agent``.

The launcher starts one agent per host over one SSH channel. The agent starts
the same pre-warmed fork server the ``procs`` backend uses (so a remote
executable gets exactly the child set-up of a local one), forks that host's
executables on request, follows their log files and streams everything back.

Channel (JSON, one object per line, both ways):

* launcher → agent: ``init`` (first line: program, registry, host address, run
  directory), ``spawn``, ``kill``, ``stacks``, ``program`` (``topo apply`` changed the
  program: executables forked from now on run the new one), ``ping`` (the lease),
  ``shutdown``;
* agent → launcher: ``hello`` (at once), ``server`` (the fork server is up, import
  errors), ``program`` (the fork server took a new program), ``started``,
  ``exited``, ``out`` (new complete lines of a log file), ``agentlog`` (of the fork
  server's own output), ``hb`` (alive), ``bye``.

A remote process survives a dropped SSH connection unless it is made not to, so the
agent ends everything it started -- fork server, executables, their process groups --
when its stdin reaches EOF (the launcher or its connection is gone, even after
``kill -9``) or when no ``ping`` arrived for the lease time (the network is cut).
The agent itself imports only the standard library and the fork server's module (so it
says hello within milliseconds); the fork server imports the runtime and the targets.
No asyncssh on the hosts.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

from topo.backends.forkserver import write_msg
from topo.backends.grant_pipe import write_spawn
from topo.backends.proctree import kill_tree
from topo.backends.titles import set_title
from topo.rundir.layout import FORKSERVER_LOG, LOGS_DIR, exe_output_path, log_path

HEARTBEAT_S = 0.5  # the agent says it is alive this often
DEFAULT_LEASE_S = 5.0  # no ping from the launcher for this long: end everything
TAIL_INTERVAL_S = 0.1
_CHUNK = 256 << 10  # at most this much of one log per message


class _Out:
    """JSON lines to the launcher; a write that fails (the launcher is gone) is dropped."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.broken = False

    def send(self, **msg: Any) -> None:
        data = (json.dumps(msg) + "\n").encode()
        with self._lock:
            if self.broken:
                return
            try:
                self._stream.write(data)
                self._stream.flush()
            except (OSError, ValueError):
                self.broken = True


class _Tail:
    """Follows log files (which appear when their executable starts) and sends each
    file's new complete lines, unchanged, to the launcher."""

    def __init__(self, out: _Out) -> None:
        self._out = out
        self._files: dict[str, Path] = {}
        self._kind: dict[str, str] = {}  # label -> message type ("out", or "agentlog")
        self._skip: dict[str, int] = {}  # bytes already there when following began
        self._handles: dict[str, Any] = {}
        self._partial: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def follow(self, label: str, path: Path, kind: str = "out") -> None:
        """Follow ``path`` from its current end (what is there came from an earlier
        agent of this host, which sent it already); its lines go as messages ``kind``."""
        with self._lock:
            if label in self._files:
                return
            self._files[label] = path
            self._kind[label] = kind
            try:
                self._skip[label] = path.stat().st_size
            except FileNotFoundError:
                pass

    def poll(self, final: bool = False) -> None:
        with self._lock:
            for label, path in self._files.items():
                handle = self._handles.get(label)
                if handle is None:
                    try:
                        handle = self._handles[label] = open(path, "rb")
                    except FileNotFoundError:
                        continue
                    handle.seek(self._skip.pop(label, 0))
                    self._partial[label] = b""
                while True:
                    data = handle.read(_CHUNK)
                    if not data and not (final and self._partial[label]):
                        break
                    data = self._partial[label] + data
                    cut = len(data) if final else data.rfind(b"\n") + 1
                    self._partial[label] = data[cut:]
                    if cut:
                        text = data[:cut].decode("utf-8", "replace")
                        self._out.send(t=self._kind[label], label=label, data=text)
                    if not data or final or len(data) < _CHUNK:
                        break

    def close(self) -> None:
        with self._lock:
            for handle in self._handles.values():
                handle.close()
            self._handles.clear()


class Agent:
    """One host's agent: fork server, executables, log streaming and the lease."""

    def __init__(self, init: dict[str, Any], out: _Out) -> None:
        from topo.ir import loads

        self.out = out
        self.run_dir = Path(init["run_dir"])
        self.run_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        (self.run_dir / LOGS_DIR).mkdir(exist_ok=True, mode=0o700)
        self.program = loads(init["program_json"])
        self.lease_s = float(init.get("lease_s", DEFAULT_LEASE_S))
        self.last_ping = time.monotonic()
        self.tail = _Tail(out)
        self.pids: dict[tuple[str, int], int] = {}
        self._ending = threading.Lock()
        self._loads = loads
        registry = dict(init["registry"])
        registry["bind_host"] = init["address"]  # nodes bind this host's own address
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        self.status = mine
        log = open(self.run_dir / FORKSERVER_LOG, "ab")
        # Sent to the launcher (the agent's log there): this directory goes at the end.
        self.tail.follow(":forkserver", self.run_dir / FORKSERVER_LOG, kind="agentlog")
        try:
            self.server = subprocess.Popen(
                [sys.executable, "-m", "topo.backends.forkserver", str(theirs.fileno())],
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=log,
                pass_fds=[theirs.fileno()],
                start_new_session=True,
            )
        finally:
            theirs.close()
            log.close()
        assert self.server.stdin is not None
        self._server_in = self.server.stdin.fileno()
        self._server_lock = threading.Lock()
        self._to_server(
            {
                "program_json": init["program_json"],
                "registry": registry,
                "run_dir": self.run_dir,
                "launcher_pid": os.getpid(),  # the fork server and children watch the agent
                "disable_run": init.get("disable_run", False),
                "modules": init.get("modules", []),
            }
        )

    def _to_server(self, msg: Any) -> None:
        with self._server_lock:
            write_msg(self._server_in, msg)

    # -- threads ------------------------------------------------------------------
    def relay_status(self) -> None:
        """Fork server datagrams (``server``, ``started``, ``exited``) to the launcher."""
        self.status.settimeout(0.2)
        while True:
            try:
                data = self.status.recv(1 << 20)
            except TimeoutError:
                if self.server.poll() is not None:
                    self.end("the fork server exited")
                continue
            except OSError:
                return
            msg = json.loads(data)
            if msg.get("t") == "started":
                self.pids[(msg["exe"], msg["attempt"])] = msg["pid"]
            elif msg.get("t") == "exited":
                self.tail.poll()  # its last lines before its exit
                self.pids.pop((msg["exe"], msg["attempt"]), None)
            self.out.send(**msg)

    def beat(self) -> None:
        """Heartbeat to the launcher, log streaming, and the lease."""
        next_beat = 0.0
        while True:
            time.sleep(TAIL_INTERVAL_S)
            self.tail.poll()
            now = time.monotonic()
            if now >= next_beat:
                self.out.send(t="hb")
                next_beat = now + HEARTBEAT_S
            if now - self.last_ping > self.lease_s:
                self.end(f"no word from the launcher for {self.lease_s:g}s")
            if self.out.broken:
                self.end("the launcher's channel is closed")

    # -- requests -----------------------------------------------------------------
    def handle(self, msg: dict[str, Any]) -> bool:
        """One request from the launcher; False at ``shutdown``."""
        t = msg.get("t")
        self.last_ping = time.monotonic()
        if t == "spawn":
            exe, attempt = msg["exe"], int(msg["attempt"])
            nodes = self.program.executable_index[exe].nodes
            for n in nodes:
                self.tail.follow(n, log_path(self.run_dir, n))
            if len(nodes) > 1:
                output = exe_output_path(self.run_dir, self.program.executable_index[exe])
                self.tail.follow(exe, output)
            with self._server_lock:  # the grant goes on to the fork server, not kept here
                write_spawn(self._server_in, exe, attempt, str(msg.get("grant", "")))
        elif t == "program":  # (before the spawns of its new executables: one channel)
            self.program = self._loads(msg["program_json"])
            modules = [str(m) for m in msg.get("modules", [])]
            self._to_server(("program", msg["program_json"], modules))
        elif t == "kill":
            pid = self.pids.get((msg["exe"], int(msg["attempt"])))
            if pid:
                kill_tree(pid)
        elif t == "stacks":
            pid = self.pids.get((msg["exe"], int(msg["attempt"])))
            if pid:
                try:
                    os.kill(pid, signal.SIGUSR1)
                except ProcessLookupError:
                    pass
        elif t == "shutdown":
            return False
        return True

    def end(self, reason: str) -> None:
        """End everything this agent started, then the agent itself (any thread)."""
        if not self._ending.acquire(blocking=False):
            return
        try:
            print(f"topo agent: ending: {reason}", file=sys.stderr, flush=True)
            try:  # the fork server kills its executables and their groups at stdin EOF
                os.close(self._server_in)
            except OSError:
                pass
            try:
                self.server.wait(3)
            except subprocess.TimeoutExpired:
                pass
            for pid in list(self.pids.values()):
                kill_tree(pid)
            kill_tree(self.server.pid)  # its process group: it started a session
            self.tail.poll(final=True)
            self.tail.close()
            self.out.send(t="bye", reason=reason)
        finally:
            os._exit(0)


def main() -> None:
    """Read ``init``, start the fork server, then serve requests until EOF or the lease ends."""
    try:
        os.setsid()  # our own process group, so ending it ends everything left in it
    except OSError:
        pass  # already a session leader (sshd's child)
    set_title("topo: agent")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # EOF on stdin is what ends us
    out = _Out(sys.stdout.buffer)
    out.send(t="hello", pid=os.getpid())  # up: the launcher's lease starts now
    stdin = sys.stdin.buffer
    while True:  # pings may come before the init
        first = stdin.readline()
        if not first:
            return
        init = json.loads(first)
        if init.get("t") == "init":
            break
    set_title(f"topo: agent {init.get('host') or init.get('address', '')}".rstrip())
    agent = Agent(init, out)
    threading.Thread(target=agent.relay_status, name="topo-agent-status", daemon=True).start()
    threading.Thread(target=agent.beat, name="topo-agent-beat", daemon=True).start()
    reason = "the launcher closed the channel"
    for line in stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if not agent.handle(msg):
            reason = "the launcher asked it to shut down"
            break
    agent.end(reason)


if __name__ == "__main__":
    main()
