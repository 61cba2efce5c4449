"""The agent of a remote backend that reaches a host over a byte stream -- the ssh
backend's SSH channel (and an ``srun`` step's pipes, say): ``python -m
topo.backends.remote.stream``, one per host and run.

It runs the host's ``HostCore`` (fork server, executables, their logs) and talks JSON
with its launcher, one object per line, both ways:

* launcher → agent: ``init`` (first line: program, registry, host address, run
  directory, lease), ``spawn``, ``kill``, ``stacks``, ``program`` (``topo apply`` changed
  the program: executables forked from now on run the new one), ``ping`` (the lease),
  ``shutdown``;
* agent → launcher: ``hello`` (at once, and with the fork server's pid once it started),
  ``server`` (the fork server is up, import errors), ``program`` (the fork server took a
  new program), ``started``, ``exited``, ``out`` (new complete lines of a log file, or of
  the fork server's own output), ``hb`` (alive), ``signal`` (a SIGTERM it lives through:
  in a Slurm step whose launcher acts on it, ``topo.runtime.sigterm``), ``bye``.

A remote process survives a dropped connection unless it is made not to, so the agent
ends everything it started -- fork server, executables, their process groups -- when
its stdin reaches EOF (the launcher or its connection is gone, even after ``kill -9``),
when no ``ping`` arrived for the lease time (the network is cut), or when its fork
server ended. It imports only the standard library and the fork server's helpers before
it says hello (within milliseconds); the fork server imports the runtime and the
targets. Nothing to install on the hosts but topo.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from topo.backends.device_plan import in_step
from topo.backends.interrupts import Interrupts
from topo.backends.remote.host import HostCore
from topo.backends.remote.silence import Silence
from topo.backends.titles import set_title
from topo.rundir.layout import LOGS_DIR

HEARTBEAT_S = 0.5  # the agent says it is alive this often
DEFAULT_LEASE_S = 5.0  # no ping from the launcher for this long: end everything
TAIL_INTERVAL_S = 0.1
CHUNK = 256 << 10  # at most this much of one log per message
STOP_S = 3.0  # at the end, the fork server has this long to end its executables


class Out:
    """JSON lines to the launcher; a write that fails (the launcher is gone) is dropped."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.broken = False

    def send(self, **msg: Any) -> None:
        """One message (from any thread)."""
        data = (json.dumps(msg) + "\n").encode()
        with self._lock:
            if self.broken:
                return
            try:
                self._stream.write(data)
                self._stream.flush()
            except (OSError, ValueError):
                self.broken = True


class LogStream:
    """Log lines to the launcher as ``out`` messages, in the order they were read."""

    def __init__(self, read: Callable[[bool], dict[str, str]], out: Out) -> None:
        self._read = read  # (final) -> label -> new complete lines (``HostCore.read_logs``)
        self._out = out
        self._lock = threading.Lock()

    def push(self, final: bool = False) -> None:
        """Every log's new complete lines (``final``: all that is left) to the launcher."""
        with self._lock:
            while True:
                chunks = self._read(final)
                self._send(chunks)
                if not chunks or final:
                    return

    def send(self, chunks: dict[str, str]) -> None:
        """Lines read elsewhere (label -> text) to the launcher, after those pushed."""
        with self._lock:
            self._send(chunks)

    def _send(self, chunks: dict[str, str]) -> None:
        for label, text in chunks.items():
            self._out.send(t="out", label=label, data=text)


class StreamAgent:
    """One host's agent: its ``HostCore``, the stream to the launcher and the lease."""

    def __init__(self, init: dict[str, Any], out: Out) -> None:
        self.out = out
        run_dir = Path(init["run_dir"])
        (run_dir / LOGS_DIR).mkdir(parents=True, exist_ok=True, mode=0o700)
        self.lease_s = float(init.get("lease_s", DEFAULT_LEASE_S))
        self.silence = Silence(self.lease_s, TAIL_INTERVAL_S)  # the launcher's pings
        self.step_devices = bool(init.get("step_devices"))  # a Slurm step's GPUs: in_step
        init = {**init, "accelerator_ids": self.devices(init.get("accelerator_ids", {}))}
        self._ending = threading.Lock()
        self.core = HostCore(
            init,
            run_dir,
            init["address"],  # nodes bind this host's own address
            self._say,
            lambda how: self.end(f"its fork server {how}"),
            chunk=CHUNK,
        )
        self.logs = LogStream(self.core.read_logs, out)

    def devices(self, ids: dict[str, str]) -> dict[str, str]:
        """The accelerators given out, as this host's processes know them (in a Slurm
        step: by the GPUs the step sees)."""
        if not self.step_devices:
            return ids
        return in_step(ids, os.environ.get("CUDA_VISIBLE_DEVICES"))

    def _say(self, **msg: Any) -> None:
        """A report of the fork server to the launcher; an executable's last lines go
        before its exit."""
        if msg.get("t") == "exited":
            self.logs.push()
        self.out.send(**msg)

    def beat(self) -> None:
        """Log streaming, the heartbeat to the launcher, and the lease."""
        next_beat = 0.0
        while True:
            time.sleep(TAIL_INTERVAL_S)
            self.logs.push()
            now = time.monotonic()
            if now >= next_beat:
                self.out.send(t="hb")
                next_beat = now + HEARTBEAT_S
            if self.silence.check() is not None:
                self.end(f"no word from the launcher for {self.lease_s:g}s")
            if self.out.broken:
                self.end("the launcher's channel is closed")

    def handle(self, msg: dict[str, Any]) -> bool:
        """One request from the launcher; False at ``shutdown``."""
        t = msg.get("t")
        self.silence.heard()
        if t == "spawn":
            self.core.spawn(msg["exe"], int(msg["attempt"]), str(msg.get("grant", "")))
        elif t == "program":  # (before the spawns of its new executables: one stream)
            devices = {"accelerator_ids": self.devices(msg.get("accelerator_ids", {}))}
            self.core.take_program(
                msg["program_json"], [str(m) for m in msg.get("modules", [])], devices
            )
        elif t == "kill":
            self.core.kill(msg["exe"], int(msg["attempt"]))
        elif t == "stacks":
            self.core.stacks(msg["exe"], int(msg["attempt"]))
        elif t == "shutdown":
            return False
        return True

    def end(self, reason: str) -> None:
        """End everything this agent started, then the agent itself (any thread)."""
        if not self._ending.acquire(blocking=False):
            return
        try:
            print(f"topo agent: ending: {reason}", file=sys.stderr, flush=True)
            self.logs.send(self.core.stop(STOP_S))  # the logs' last lines
            self.out.send(t="bye", reason=reason)
        finally:
            os._exit(0)


def report_sigterm(out: Out) -> Interrupts | None:
    """In a Slurm step whose launcher acts on it (``topo.runtime.sigterm``): SIGTERM does
    not end the agent, it is reported to the launcher (``signal``), which decides."""
    if "SLURM_STEP_ID" not in os.environ:  # (the runtime's import: only where it may apply)
        return None
    from topo.runtime.sigterm import holds_sigterm

    if not holds_sigterm():
        return None
    return Interrupts(
        signal.SIGTERM, then=lambda signum: out.send(t="signal", name="SIGTERM")
    ).start()


def main() -> None:
    """Read ``init``, start the fork server, then serve requests until EOF or the lease ends."""
    try:
        os.setsid()  # our own process group, so ending it ends everything left in it
    except OSError:
        pass  # already a session leader (sshd's child)
    set_title("topo: agent")
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)  # EOF on stdin is what ends us
    out = Out(sys.stdout.buffer)
    out.send(t="hello", pid=os.getpid())  # up: the launcher's lease starts now
    report_sigterm(out)
    stdin = sys.stdin.buffer
    while True:  # pings may come before the init
        first = stdin.readline()
        if not first:
            return
        init = json.loads(first)
        if init.get("t") == "init":
            break
    set_title(f"topo: agent {init.get('host') or init.get('address', '')}".rstrip())
    agent = StreamAgent(init, out)
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
