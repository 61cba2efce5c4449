"""The process a reverb node's server runs in: its own network namespace, two doors.

Reverb's gRPC server listens on ``[::]:PORT`` of every interface and authenticates
nobody. The reverb node therefore forks a child that moves into a network namespace
of its own (:mod:`topo.runtime.isolation`: only ``lo``), builds the tables and starts the
server there, and opens two doors to it:

* a Unix socket in a private (0700) directory, relayed to the server's loopback port
  (:class:`~topo.nodes.relay.UnixRelay`): for clients on the same host, of the same
  user;
* across hosts, a :class:`~topo.runtime.streams.Gateway` on a TCP socket that the
  parent opened in the host's namespace before the fork: only callers holding the
  right to call the reverb node get through its CURVE handshake (authenticated,
  encrypted), the same right its topo RPC server asks for.

Where no namespace can be made the server listens on the host as before, and the node
says so. The parent talks to the child over a socket pair, one JSON object per packet.
The child is a fork of the node's process, fast (Reverb is imported already) while no
gRPC thread runs there; where one does (the threads backend, a node colocated with a
reverb client; another node of the same process, which may be starting either) forking
could leave the child with gRPC's locks held, so the child is a
fresh interpreter, handed the spec (pickled by its own parent) on the socket pair.
Nothing from any peer is unpickled.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any

from topo.runtime.auth import Mechanism
from topo.runtime.sigterm import hold_sigterm

DRAIN_S = 2.0  # at most this long releasing held-back writers at the stop, quiet wait included
QUIET_MIN_S = 0.5  # at least this long waiting for the doors to go quiet after the release
# The server's process is killed if it has not ended this long after stop: nothing in it
# is kept at the stop (a checkpoint is taken by its own request before), and at 2 s the
# release, this wait and the node's own exit took a loaded machine past the 5 s grace.
STOP_CHILD_S = 1.0
RELEASE_BATCHES = (256, 64, 16, 4)  # samples drawn at once to release them, largest first


class JailError(RuntimeError):
    """The reverb server's process could not start, or ended."""


@dataclass
class JailSpec:
    """What the child needs: the tables, where to checkpoint, its doors."""

    tables: Any  # a factory returning reverb.Tables, called with ``table_args``
    table_args: dict[str, Any]
    checkpoint_path: str
    unix_path: str
    listener: socket.socket | None = None  # the gateway's socket, in the host namespace
    keys: GatewayKeys | None = None  # who the gateway admits


@dataclass(frozen=True)
class GatewayKeys:
    """The gateway's side of the reverb node's handshake: the node's ``token`` (callers
    prove it) and CURVE ``secret``, in ZAP ``domain``, with ``mechanism``."""

    mechanism: Mechanism
    domain: str
    token: str
    secret: str | None
    label: str


class Jail:
    """The parent's side: start the child, ask it things, stop it."""

    def __init__(self, spec: JailSpec, ready_timeout_s: float = 600.0) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._proc: subprocess.Popen[bytes] | None = None
        if _grpc_running():
            pid = self._spawn(spec, mine, theirs)
        else:
            _import_for_child(spec)
            pid = os.fork()
        if pid == 0:  # pragma: no cover - the child (covered by the tests' real runs)
            code = 1
            try:
                mine.close()
                code = _serve(spec, theirs)
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)  # never the parent's atexit handlers (its socket directory)
        theirs.close()
        if spec.listener is not None:
            spec.listener.close()  # the child holds it: the port closes when it ends
        self.pid = pid
        self._control = mine
        self._lock = threading.Lock()
        self._ended = False
        self.killed = False  # stop() had to SIGKILL the child (it did not end in time)
        ready = self._receive(ready_timeout_s)
        if "error" in ready:
            self.stop(2.0)
            raise JailError(f"the reverb server could not start:\n{ready['error']}")
        self.port: int = ready["port"]
        self.isolated: str | None = ready["why_not_isolated"]  # None: isolated

    def _spawn(self, spec: JailSpec, mine: socket.socket, theirs: socket.socket) -> int:
        """Start the child as a fresh interpreter and hand it ``spec``; its pid."""
        import cloudpickle

        fds = [theirs.fileno()] + ([spec.listener.fileno()] if spec.listener else [])
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "topo.nodes.reverb_jail", *map(str, fds)], pass_fds=fds
        )
        handed = {k: v for k, v in vars(spec).items() if k != "listener"}
        data = cloudpickle.dumps((list(sys.path), handed))
        mine.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, len(data) + (1 << 16))
        if mine.send(data) != len(data):  # one packet: the spec whole
            raise JailError("could not hand the reverb server its tables (too large)")
        return self._proc.pid

    def _receive(self, timeout_s: float | None) -> dict[str, Any]:
        ready, _, _ = select.select([self._control], [], [], timeout_s)
        if not ready:
            raise JailError("the reverb server's process did not answer")
        data = self._control.recv(1 << 20)
        if not data:
            self._ended = True
            raise JailError("the reverb server's process ended")
        return dict(json.loads(data))

    def request(self, op: str, timeout_s: float | None = None, **args: str) -> dict[str, Any]:
        """Ask the child to do ``op`` (``checkpoint``, ``restore``, ``release``); its answer."""
        with self._lock:
            if self._ended:
                raise JailError("the reverb server's process ended")
            try:
                self._control.send(json.dumps({"op": op, **args}).encode())
            except OSError as exc:
                self._ended = True
                raise JailError("the reverb server's process ended") from exc
            answer = self._receive(timeout_s)
        if "error" in answer:
            raise RuntimeError(answer["error"])
        return answer

    def alive(self) -> bool:
        """False once the child ended (its end of the socket pair closed)."""
        if self._ended:
            return False
        with self._lock:
            ready, _, _ = select.select([self._control], [], [], 0)
            if ready and not self._control.recv(1, socket.MSG_PEEK):
                self._ended = True
        return not self._ended

    def stop(self, timeout_s: float = STOP_CHILD_S) -> None:
        """Stop the server (gracefully, then SIGKILL after ``timeout_s``) and reap it."""
        try:
            self._control.send(json.dumps({"op": "stop"}).encode())
        except OSError:
            pass
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            try:
                done, _ = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped by someone else
                break
            if done:
                if self._proc is not None:
                    self._proc.returncode = 0  # reaped here
                break
            time.sleep(0.02)
        else:
            self.killed = True
            try:
                os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
        self._ended = True
        self._control.close()


def _import_for_child(spec: JailSpec) -> None:
    """Import here, before the fork, every module the child imports. Another thread of
    this process (another node, on the threads backend) may be importing one of them
    at the moment of the fork: the child would inherit that module's import lock held
    by a thread it does not have, and wait on it for ever."""
    import reverb  # noqa: F401

    import topo.nodes.relay
    import topo.runtime.auth
    import topo.runtime.isolation
    import topo.runtime.rights
    import topo.runtime.streams  # noqa: F401
    from topo.targets import load_target

    if isinstance(spec.tables, str):
        load_target(spec.tables)


def _grpc_running() -> bool:
    """True when a fork of this process could copy a lock another thread holds: a gRPC
    thread runs here, JAX has started its backends (its threads too), or another node
    runs in this process (colocated, or the threads backend): it may be starting JAX or
    gRPC at the very moment of the fork (a colocated learner did: the forked server
    hung, and the learner waited a minute for its replay)."""
    bridge = sys.modules.get("jax._src.xla_bridge")
    if bridge is not None and getattr(bridge, "_at_fork_handler_installed", False):
        return True
    me = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not me and thread.name.startswith(("topo-node-", "topo-exe-")):
            return True
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return True  # cannot tell: the safe way
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read()
        except OSError:
            continue
        if name.startswith(("grpc", "default-executo", "resolver-execu", "timer_manager")):
            return True
    return False


def _main(argv: list[str]) -> int:  # pragma: no cover - the spawned child
    """A child started as a fresh interpreter: take the spec from the socket pair."""
    import pickle

    control = socket.socket(fileno=int(argv[0]))
    path, fields = pickle.loads(control.recv(1 << 26))  # from our parent, no one else
    sys.path[:] = path
    spec = JailSpec(**fields)
    if len(argv) > 1:
        spec.listener = socket.socket(fileno=int(argv[1]))
    return _serve(spec, control)


def _build_tables(spec: JailSpec) -> list[Any]:
    import reverb

    from topo.targets import load_target

    factory = load_target(spec.tables) if isinstance(spec.tables, str) else spec.tables
    made = factory(**spec.table_args)
    tables = list(made)
    if not tables or not all(isinstance(t, reverb.Table) for t in tables):
        raise TypeError(f"{spec.tables} must return a non-empty list of reverb.Table, got {made!r}")
    return tables


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _serve(spec: JailSpec, control: socket.socket) -> int:  # pragma: no cover - child
    """The child: isolate, serve, answer the parent until told to stop or orphaned."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops it (after draining)
    if not hold_sigterm():  # (a Slurm step's SIGTERM is a notice: the launcher's)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    parent = os.getppid()
    from topo.runtime.isolation import isolate

    why_not = isolate()
    try:
        import reverb

        from topo.nodes.relay import UnixRelay
        from topo.runtime.auth import ServerAuth
        from topo.runtime.rights import node_acceptor
        from topo.runtime.streams import Gateway

        served = _Served(spec, reverb.checkpointers.DefaultCheckpointer(spec.checkpoint_path))
        relay = UnixRelay(spec.unix_path, served.port)
        gateway = None
        if spec.listener is not None and spec.keys is not None:
            keys = spec.keys
            auth = ServerAuth(keys.domain, node_acceptor(keys.token), keys.secret, keys.label)
            gateway = Gateway(keys.mechanism, auth, relay.dial, listener=spec.listener)
    except BaseException:
        control.send(json.dumps({"error": traceback.format_exc()}).encode())
        return 1
    control.send(json.dumps({"port": served.port, "why_not_isolated": why_not}).encode())
    try:
        while os.getppid() == parent:
            ready, _, _ = select.select([control], [], [], 0.5)
            if not ready:
                continue
            data = control.recv(1 << 16)
            if not data:
                break
            message = json.loads(data)
            op = message.get("op")
            if op == "stop":
                break
            try:
                if op == "checkpoint":
                    answer: dict[str, Any] = {"path": str(served.client.checkpoint())}
                elif op == "restore":
                    old, served = served, _restored(spec, message["checkpoint"], message["root"])
                    relay.retarget(served.port)  # the doors stay, they lead to the new one
                    old.server.stop()
                    answer = {"port": served.port}
                elif op == "release":
                    began = time.monotonic()
                    _release_writers(served.tables, served.client)
                    doors = [relay] if gateway is None else [relay, gateway]
                    # Both share DRAIN_S (the quiet wait gets QUIET_MIN_S at least): one
                    # after the other, each with its own, they took 4 s of a 5 s grace.
                    left = DRAIN_S - (time.monotonic() - began)
                    _wait_quiet(doors, within_s=max(QUIET_MIN_S, left))
                    answer = {}
                else:
                    answer = {"error": f"unknown request {op!r}"}
            except Exception as exc:
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            control.send(json.dumps(answer).encode())
    finally:
        if gateway is not None:
            gateway.close()
        relay.close()
        served.server.stop()
    return 0


class _Served:  # pragma: no cover - runs in the child
    """The Reverb server the child runs now (a restore replaces it) and a client of it."""

    def __init__(self, spec: JailSpec, checkpointer: Any) -> None:
        import reverb

        self.tables = _build_tables(spec)
        self.port = _free_port()  # in a namespace of our own every port is free
        self.server = reverb.Server(self.tables, port=self.port, checkpointer=checkpointer)
        self.client = reverb.Client(f"127.0.0.1:{self.port}")


def _restored(spec: JailSpec, checkpoint: str, root: str) -> _Served:  # pragma: no cover
    """A new server holding the tables of the Reverb checkpoint directory ``checkpoint``
    that then checkpoints where the node's always did (``spec.checkpoint_path``).

    Reverb loads the newest checkpoint under its checkpointer's root, and a given one
    (its fallback) only when that root holds none; the node's own root may hold a newer
    one than the snapshot's. So the server's root is ``root``, a symbolic link: to an
    empty directory while the server loads, to the node's root from then on."""
    import reverb

    empty = root + ".empty"
    os.mkdir(empty, 0o700)
    try:
        os.symlink(empty, root)
        checkpointer = reverb.checkpointers.DefaultCheckpointer(
            root, fallback_checkpoint_path=checkpoint
        )
        served = None
        try:
            served = _Served(spec, checkpointer)
            os.makedirs(spec.checkpoint_path, exist_ok=True)
            os.symlink(spec.checkpoint_path, root + ".next")
            os.replace(root + ".next", root)
        except BaseException:
            if served is not None:
                served.server.stop()
            os.unlink(root)
            raise
    finally:
        os.rmdir(empty)
    return served


def _wait_quiet(doors: list[Any], quiet_s: float = 0.5, within_s: float = DRAIN_S) -> None:
    """At the stop, once held-back writers are released: keep serving until no bytes
    went through the doors for ``quiet_s`` (peers closing their writers, whose last
    confirmations must arrive: a Reverb writer whose server goes away while it closes
    can abort its process), or ``within_s`` at most."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if time.monotonic() - max(d.last_active for d in doors) >= quiet_s:
            return
        time.sleep(0.05)


def _release_writers(
    tables: list[Any], client: Any, within_s: float = DRAIN_S, calm_s: float = 0.3
) -> None:  # pragma: no cover - runs in the child
    """At the stop, let writers that a rate limiter holds back finish: while a table
    refuses inserts (its sample-to-insert ratio wants samples first), sample and drop
    items. Peers see the stop between writes and end their loops; a client still
    blocked inside Reverb when its server closes can abort its whole process (with the
    threads backend, the launcher). Ends after ``calm_s`` without a held-back table, or
    after ``within_s`` (inside the default grace period)."""
    end = time.monotonic() + within_s
    calm_since = time.monotonic()
    while time.monotonic() < end:
        held = [t.name for t in tables if not t.can_insert(1) and t.can_sample(1)]
        if not held:
            if time.monotonic() - calm_since >= calm_s:
                return
            time.sleep(0.02)
            continue
        calm_since = time.monotonic()
        for table in tables:
            if table.name not in held:
                continue
            # As many as the limiter allows now (a sample it refused would block); a sample
            # per sampler made would be slow under load (a limiter may want 32 per insert)
            # and each sampler made logs a line.
            count = next((n for n in RELEASE_BATCHES if table.can_sample(n)), 1)
            # as stored: items of scalar columns (a trajectory writer's squeezed steps, as
            # Acme's and Mava's adders write) do not split into timesteps
            for _ in client.sample(table.name, num_samples=count, emit_timesteps=False):
                pass


def _leave(code: int) -> None:  # pragma: no cover - the spawned child
    """Flush and end the spawned child at once, as the forked one does: the interpreter's
    own exit (TensorFlow's and gRPC's teardown) did not end within seconds, so every stop
    waited for the parent's SIGKILL, past a program's default grace period."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


if __name__ == "__main__":  # pragma: no cover - started by Jail
    _code = 1
    try:
        _code = _main(sys.argv[1:])
    except BaseException:
        traceback.print_exc()
    finally:
        _leave(_code)
