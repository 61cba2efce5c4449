"""SSH connections of the ``ssh`` backend: one asyncssh connection per host, driven
from an event loop in a daemon thread so that the (synchronous) launcher can use them.

Strict host-key checking against the inventory's ``known_hosts``, public keys only
(no passwords, no keyboard-interactive). Every remote command gets its environment
in its command line: sshd drops environment variables a client sends.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shlex
import threading
import time
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any, TypeVar

import asyncssh

from topo.backends.remote.silence import Silence
from topo.backends.ssh.inventory import HostSpec

# asyncssh logs every channel opened and closed at INFO; a program whose logging shows
# INFO (absl's app.run does) would print dozens of lines per run. Kept at WARNING unless
# the program set a level for it.
if logging.getLogger("asyncssh").level == logging.NOTSET:
    logging.getLogger("asyncssh").setLevel(logging.WARNING)

T = TypeVar("T")
CONNECT_TIMEOUT_S = 10.0
PING_S = 1.0  # the launcher renews each agent's lease this often
START_S = 60.0  # an agent has this long to say hello (a remote interpreter on a busy host)
EXIT_STATUS_S = 10.0  # after its output ends, how long a remote command has to say how it ended


def remote_command(
    host: HostSpec, argv: list[str], env: Mapping[str, str], cwd: str | None = None
) -> str:
    """A shell command line that runs ``argv`` on ``host`` with ``env``, in ``cwd``
    (default: the host's workdir, created if missing)."""
    where = cwd or host.workdir
    assignments = [f"{k}={v}" for k, v in {**host.env, **env}.items()]
    parts = ["exec", "env", *assignments, *argv]
    return f"mkdir -p {shlex.quote(host.workdir)} && cd {shlex.quote(where)} && " + " ".join(
        shlex.quote(p) for p in parts
    )


def host_key_problem(host: HostSpec) -> str:
    """Why ``host``'s key was not accepted: ``known_hosts`` has no entry for it at all, or
    its entry holds another key."""
    where = f"{host.address}" if host.port == 22 else f"[{host.address}]:{host.port}"
    try:
        known = asyncssh.read_known_hosts(str(host.known_hosts))
        found = known.match(host.address, host.address, None if host.port == 22 else host.port)
        listed = bool(found[0] or found[1] or found[3] or found[5])  # keys, CAs, X.509
    except (OSError, ValueError, asyncssh.Error):  # unreadable: the general answer
        listed = True
    if listed:
        return f"its host key is not the one in known_hosts ({host.known_hosts})"
    scan = "ssh-keyscan " + ("" if host.port == 22 else f"-p {host.port} ") + host.address
    return (
        f"known_hosts ({host.known_hosts}) has no entry for {where}: add the host's key "
        f"(`{scan}` prints it; check it against the host before you trust it)"
    )


def describe_error(exc: BaseException) -> str:
    """What went wrong with a connection, for the user."""
    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return f"its host key is not the one in known_hosts ({exc.reason})"
    if isinstance(exc, asyncssh.PermissionDenied):
        return "the key was refused (permission denied)"
    if isinstance(exc, asyncssh.DisconnectError):
        return f"disconnected: {exc.reason}"
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return f"no answer within {CONNECT_TIMEOUT_S:g}s"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return f"{type(exc).__name__}: {exc}"


class Sessions:
    """The connections to an inventory's hosts and the event loop that serves them."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.conns: dict[str, asyncssh.SSHClientConnection] = {}
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="topo-ssh-loop", daemon=True
        )
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    async def _connect(self, host: HostSpec) -> asyncssh.SSHClientConnection:
        return await asyncssh.connect(
            host.address,
            port=host.port,
            username=host.user,
            client_keys=[str(host.key)] if host.key else (),
            known_hosts=str(host.known_hosts),
            preferred_auth="publickey",
            agent_path=None,
            password=None,
            connect_timeout=CONNECT_TIMEOUT_S,
            keepalive_interval=2,
            keepalive_count_max=3,
        )

    def connect(self, hosts: list[HostSpec]) -> dict[str, str]:
        """Connect to every host at once; the hosts that failed, with why."""

        async def all_hosts() -> list[Any]:
            return await asyncio.gather(*(self._connect(h) for h in hosts), return_exceptions=True)

        failed: dict[str, str] = {}
        for host, result in zip(hosts, self.call(all_hosts()), strict=True):
            if isinstance(result, asyncssh.HostKeyNotVerifiable):
                why = host_key_problem(host)
                failed[host.name] = f"cannot connect to {host.address}:{host.port}: {why}"
            elif isinstance(result, BaseException):
                failed[host.name] = f"cannot connect to {host.address}:{host.port}: " + (
                    describe_error(result)
                )
            else:
                self.conns[host.name] = result
        return failed

    def run(self, host: str, command: str, timeout: float) -> tuple[int | None, str, str]:
        """Run ``command`` on ``host``: exit status (None: it did not finish), stdout, stderr."""
        return self.call(self._run(host, command, timeout))

    def run_all(
        self, commands: Mapping[str, str], timeout: float
    ) -> dict[str, tuple[int | None, str, str]]:
        """``run`` on several hosts at once."""
        futures = {
            h: asyncio.run_coroutine_threadsafe(self._run(h, c, timeout), self.loop)
            for h, c in commands.items()
        }
        return {h: f.result() for h, f in futures.items()}

    async def _run(self, host: str, command: str, timeout: float) -> tuple[int | None, str, str]:
        conn = self.conns.get(host)
        if conn is None:
            return None, "", "its connection is closed"
        try:
            r = await conn.run(command, timeout=timeout)
        except asyncssh.TimeoutError as exc:
            return None, str(exc.stdout or ""), str(exc.stderr or "") + "(timed out)"
        except (asyncssh.Error, OSError) as exc:
            return None, "", describe_error(exc)
        return r.exit_status, str(r.stdout or ""), str(r.stderr or "")

    def put(self, host: str, local: Path, remote: str) -> None:
        """Copy one file to ``host`` over SFTP."""

        async def go() -> None:
            async with self.conns[host].start_sftp_client() as sftp:
                await sftp.put(str(local), remote)

        self.call(go())

    def open_channel(
        self,
        host: str,
        command: str,
        on_message: Callable[[dict[str, Any]], None],
        on_end: Callable[[str], None],
        stderr_file: Path,
        lease_s: float,
        on_died: Callable[[str], None] | None = None,
    ) -> Channel:
        """Start ``command`` (an agent) on ``host`` and talk JSON lines with it. ``on_end``
        hears why the channel ended; ``on_died`` (if given) instead hears how the agent
        ended when it ended by itself (an exit status or signal came back over SSH)."""
        channel = Channel(self, host, on_message, on_end, stderr_file, lease_s, on_died)
        self.call(channel.start(command), CONNECT_TIMEOUT_S)
        return channel

    def drop(self, host: str) -> None:
        """Close ``host``'s connection (from any thread, without waiting): it is lost."""
        conn = self.conns.pop(host, None)
        if conn is not None and self.loop.is_running():
            self.loop.call_soon_threadsafe(conn.close)

    def close(self) -> None:
        """Close every connection and stop the loop."""

        async def go() -> None:
            for conn in self.conns.values():
                conn.close()
            await asyncio.gather(
                *(asyncio.wait_for(c.wait_closed(), 3) for c in self.conns.values()),
                return_exceptions=True,
            )

        if self.loop.is_running():
            try:
                self.call(go(), 10)
            except Exception:
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(5)
        self.conns.clear()


class Channel:
    """One agent's SSH channel: requests out, messages in, and the agent's heartbeat."""

    def __init__(
        self,
        sessions: Sessions,
        host: str,
        on_message: Callable[[dict[str, Any]], None],
        on_end: Callable[[str], None],
        stderr_file: Path,
        lease_s: float,
        on_died: Callable[[str], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.host = host
        self._on_message = on_message
        self._on_end = on_end
        self._on_died = on_died
        self._stderr_file = stderr_file
        self._silence = Silence(lease_s, PING_S)  # (applies once the agent said something)
        self._process: asyncssh.SSHClientProcess[bytes] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self.ended = False

    async def start(self, command: str) -> None:
        conn = self.sessions.conns[self.host]
        self._process = await conn.create_process(command, encoding=None)
        self._tasks = [
            asyncio.ensure_future(self._read()),
            asyncio.ensure_future(self._read_stderr()),
            asyncio.ensure_future(self._ping()),
        ]

    def send(self, **msg: Any) -> None:
        """Send one request (from any thread); dropped once the channel ended."""
        data = (json.dumps(msg) + "\n").encode()
        self.sessions.loop.call_soon_threadsafe(self._write, data)

    def _write(self, data: bytes) -> None:
        if self._process is None or self.ended:
            return
        try:
            self._process.stdin.write(data)
        except (asyncssh.Error, OSError, BrokenPipeError):
            # The channel is closing: the reader, at its end, says how (an agent killed on
            # a host that is fine is not a lost host); one that never ends, the lease.
            pass

    async def _read(self) -> None:
        assert self._process is not None
        try:
            while True:
                line = await self._process.stdout.readline()
                if not line:
                    break
                self._silence.heard()
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                self._on_message(msg)
        except (asyncssh.Error, OSError) as exc:
            self._end(f"the SSH channel broke: {describe_error(exc)}")
            return
        how = await self._how_it_exited()
        if how is None:
            self._end("the agent's channel closed")
        else:
            self._end(how, died=True)

    async def _how_it_exited(self) -> str | None:
        """How the remote command ended (its exit status or signal, as sshd reports
        it); None when the channel closed without saying (e.g. the connection broke)."""
        assert self._process is not None
        try:
            # sshd sends the exit status just after the output ends; on a loaded host
            # that can take seconds, and without it the host would count as lost
            await asyncio.wait_for(self._process.wait_closed(), EXIT_STATUS_S)
        except (TimeoutError, asyncssh.Error, OSError):
            pass
        signal = self._process.exit_signal
        if signal is not None:
            name, core_dumped = signal[0], signal[1]
            return f"was killed by SIG{name}" + (" (core dumped)" if core_dumped else "")
        status = self._process.exit_status
        if status is not None and status >= 0:
            return f"exited with code {status}"
        return None

    async def _read_stderr(self) -> None:
        assert self._process is not None
        with open(self._stderr_file, "ab") as out:
            try:
                while True:
                    chunk = await self._process.stderr.read(65536)
                    if not chunk:
                        return
                    out.write(chunk)
                    out.flush()
            except (asyncssh.Error, OSError):
                return

    async def _ping(self) -> None:
        while not self.ended:
            self._write(b'{"t": "ping"}\n')
            await asyncio.sleep(PING_S)
            silence = self._silence
            if silence.heard_once and silence.check() is not None:
                self._end(f"no heartbeat from the host for {silence.lease_s:g}s")
            elif not silence.heard_once and time.monotonic() - silence.last_heard > START_S:
                self._end(f"its agent did not start within {START_S:g}s")

    def _end(self, reason: str, died: bool = False) -> None:
        if self.ended:
            return
        self.ended = True
        if self._process is not None:
            try:
                self._process.close()
            except Exception:
                pass
        if died and self._on_died is not None:
            self._on_died(reason)
        else:
            self._on_end(reason)

    def close(self) -> None:
        """Close stdin (the agent ends everything at EOF) and wait a little for it."""

        async def go() -> None:
            if self._process is None:
                return
            try:
                self._process.stdin.write_eof()
            except (asyncssh.Error, OSError):
                pass
            try:
                await asyncio.wait_for(self._process.wait_closed(), 6)
            except (TimeoutError, asyncssh.Error, OSError):
                pass
            for task in self._tasks:
                task.cancel()

        try:
            self.sessions.call(go(), 10)
        except Exception:
            pass
