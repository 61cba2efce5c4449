"""ReverbServer: the node behind ``kind: reverb``, a dm-reverb replay server.

Reverb's server authenticates nobody and listens on every interface of its port, so
topo never lets it face the network: the node forks a process that moves into a
network namespace of its own (only ``lo``) and serves there
(:mod:`topo.nodes.reverb_jail`). Peers reach it through two doors:

* on its host, a Unix socket in a private (0700) directory: the run's socket
  directory on one host, else one of the node's own; other users cannot open it;
* from other hosts (ssh, ray), a gateway speaking ZeroMQ CURVE with the program's
  key (:mod:`topo.runtime.streams`): each peer process gets a local (abstract) Unix
  socket of its own that tunnels there (:mod:`topo.runtime.entrance`).

Peers hold a :class:`topo.kinds.clients.ReverbClient`, whose ``reverb.Client`` (and
the writers and datasets made from its ``server_address``) use whichever door is
theirs; user code does not change. Where no namespace can be made (no unprivileged
user namespaces, a container without the capability) the server listens on its host
as before and the node warns that its port is open.

With ``checkpoint_dir`` the server restores the latest checkpoint found there when it
starts (so a restarted replay keeps its data), checkpoints every ``checkpoint_every_s``
seconds and once more when the program stops. A relative ``checkpoint_dir`` resolves
against the node's working directory (the group's ``workdir`` if set, else the
directory ``topo run`` was started from), so checkpoints outlive a single run. Without
``checkpoint_dir`` nothing is written unless a snapshot is taken: Reverb's own default
checkpointer would leave an empty temporary directory behind for every run.

State (``save()``/``restore()``, for topo's program snapshots): the bytes of an
uncompressed tar holding one directory, ``checkpoint/``, a Reverb checkpoint as Reverb
writes it (``tables.tfrecord``, ``items.tfrecord``, ``chunks.tfrecord``, ``DONE``;
Reverb compresses the data itself). ``save()`` has the server checkpoint into
``checkpoint_dir``, or into a scratch directory beside the node's socket that is removed
at the end. Reverb reads each table under that table's lock, so every table is whole; an
item written to two tables while it runs could be in one only, which is why a snapshot
takes it while the writers are held at their pause points. ``restore()`` replaces
the server by one loaded from the state, behind the same doors. The tables keep the
settings they were saved with (size, sampler, rate limiter): Reverb takes them from
the checkpoint; a table the factory makes and the state lacks starts empty, and a
state holding a table the factory does not make is refused.

A restarted reverb node keeps its doors (remembered in the program's address book):
the same Unix socket path and the same gateway port, so the ``reverb.Client``s,
writers and datasets of its peers reconnect by themselves once it is back. Only if the
gateway's port was taken in between does it take a new one (and say so in its log);
peers then follow when they next ask the node for its address (their ``ReverbClient``
does so after a broken connection).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import shutil
import tarfile
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from topo.runtime import lifecycle

# TensorFlow's start-up INFO lines would open every reverb node's log; warnings stay.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import reverb  # noqa: F401 - imported where the fork server warms targets up

from topo.nodes.reverb_jail import GatewayKeys, Jail, JailError, JailSpec
from topo.runtime import rights, transport
from topo.runtime.context import ProgramContext, current_node_info, maybe_current_program
from topo.runtime.streams import listening_socket, tcp_endpoint

ADDRESS_KEY = "{node}@reverb"  # the address book entry remembering a node's doors
WATCH_S = 0.5  # how often the node looks at its server's process
ITEMS_FILE = "items.tfrecord"  # a checkpoint's file Reverb opens once every table is copied
COPIED_POLL_S = 0.002  # how often capture_state() looks for it
log = logging.getLogger("topo.nodes.reverb")


def remembered_doors(host: str) -> tuple[str | None, dict[str, Any]]:
    """(address book key, doors) of the calling reverb node's earlier attempt on
    ``host``: ``{}`` for a first attempt, outside a program, or after a move."""
    program, node = maybe_current_program(), current_node_info()
    if program is None or node is None:
        return None, {}
    key = ADDRESS_KEY.format(node=node.id)
    try:
        earlier = program.address_book.lookup(key)
    except Exception as exc:  # the launcher is busy: new doors, the clients re-resolve
        log.warning("reverb: could not look up the earlier address (%r)", exc)
        return key, {}
    try:
        doors = json.loads(earlier) if earlier else {}
    except ValueError:
        doors = {}
    return key, doors if isinstance(doors, dict) and doors.get("host") == host else {}


def remember_doors(key: str | None, doors: dict[str, Any]) -> None:
    """Publish ``doors`` under ``key`` in the program's address book (kept across the
    node's restarts: the registry forgets only node ids when their process ends)."""
    program = maybe_current_program()
    if key is None or program is None:
        return
    try:
        program.address_book.register(key, json.dumps(doors))
    except Exception as exc:
        log.warning("reverb: could not remember the address %s (%r)", doors, exc)


def _private_dir(earlier: str | None) -> str:
    """A 0700 directory of ours for the Unix socket: the earlier attempt's (same path,
    so peers' addresses still work) when it can be had again, else a new one."""
    if earlier:
        with contextlib.suppress(OSError):
            os.mkdir(earlier, 0o700)
        try:
            transport.check_ipc_dir(earlier)
            return earlier
        except (OSError, transport.TransportError):
            pass
    return transport.make_ipc_dir(owned=False)


def _gateway_keys(program: ProgramContext | None) -> GatewayKeys | None:
    """Who the gateway of this process's reverb node admits: callers holding the right
    to call the node, proven as to its topo RPC server."""
    node = current_node_info()
    if program is None or node is None:
        return None
    token, secret = program.serving(node.id)
    domain = rights.zap_domain(program.program_id, f"{node.id}/gateway")
    return GatewayKeys(program.mechanism, domain, token, secret, f"reverb gateway of {node.id!r}")


class ReverbServer:
    """A Reverb server built from the ``tables`` factory, called with the group's ``args``
    (table sizes, sampler, rate limiter: whatever the factory takes); serves ``address()``,
    ``doors()`` and ``checkpoint()`` over topo RPC and checkpoints periodically."""

    def __init__(
        self,
        tables: str | Callable[..., Any],
        checkpoint_dir: str | None = None,
        checkpoint_every_s: float | None = None,
        **table_args: Any,
    ) -> None:
        self._dir = None if checkpoint_dir is None else Path(checkpoint_dir).resolve()
        self._every_s = checkpoint_every_s
        self._saving = threading.Lock()  # one checkpoint at a time: Reverb keeps the newest
        program = maybe_current_program()
        self._host = program.bind_host if program is not None else "127.0.0.1"
        key, earlier = remembered_doors(self._host)
        self._own_dir, unix_path = self._unix_path(program, earlier.get("unix"))
        # The node's own space for snapshots, beside its socket (in a 0700 directory that
        # is removed with the node or the run); emptied of an earlier attempt's leftovers.
        self._space = unix_path + ".state"
        shutil.rmtree(self._space, ignore_errors=True)
        os.mkdir(self._space, 0o700)
        if self._dir is not None:
            self._dir.mkdir(parents=True, exist_ok=True)
            # The server loads the newest checkpoint in this directory, if any, at start.
            path = str(self._dir)
        else:  # made by the first save(): empty at the start, nothing loads from it
            path = os.path.join(self._space, "checkpoints")
        self._checkpoints = path  # where the server's checkpoints go (capture_state watches it)
        listener = None
        if program is not None and program.ipc_dir is None:  # peers on other hosts
            port = int(earlier.get("port") or 0)
            listener = listening_socket(self._host, port)
            got = int(listener.getsockname()[1])
            if port and got != port:
                print(
                    f"reverb: port {port} of the earlier attempt is taken; the gateway "
                    f"listens on {got} (peers holding the old address follow when they "
                    "next ask)",
                    flush=True,
                )
            port = got
        spec = JailSpec(
            tables,
            table_args,
            path,
            unix_path,
            listener,
            _gateway_keys(program) if listener is not None else None,
        )
        try:
            self._jail = Jail(spec)
        except JailError:
            shutil.rmtree(self._space, ignore_errors=True)
            self._remove_own_dir()
            raise
        self._doors: dict[str, Any] = {"host": self._host, "unix": unix_path}
        if listener is not None:
            self._doors.update(port=port, gateway=tcp_endpoint(self._host, port))
        self._doors["isolated"] = self._jail.isolated is None
        self._warn_if_open()
        remember_doors(key, self._doors)

    def _warn_if_open(self) -> None:
        """Say so when the server could not be isolated: its port is open."""
        if self._jail.isolated is not None:
            node = current_node_info()
            print(
                f"topo: WARNING: reverb node {node.id if node else '?'} could not be "
                f"isolated ({self._jail.isolated}): its Reverb port {self._jail.port} is "
                "open to every host and local user that can reach this host",
                flush=True,
            )

    def _unix_path(self, program: ProgramContext | None, earlier: str | None) -> tuple[str, str]:
        """(directory to remove at the end or "", socket path) of the Unix door."""
        node = current_node_info()
        name = "reverb-" + hashlib.sha1((node.id if node else "").encode()).hexdigest()[:10]
        if program is not None and program.ipc_dir is not None:  # the run's own, removed
            return "", os.path.join(program.ipc_dir, name)  # with the run
        directory = _private_dir(os.path.dirname(earlier) if earlier else None)
        return directory, os.path.join(directory, name)

    def address(self) -> str:
        """The address a ``reverb.Client`` on this node's host connects to
        (``unix:PATH``; peers on other hosts use ``doors()``)."""
        return f"unix:{self._doors['unix']}"

    def doors(self) -> dict[str, Any]:
        """Where the server is reached: ``host``, ``unix`` (the socket on that host),
        ``gateway`` (the CURVE endpoint for other hosts, when the program spans hosts)
        and ``isolated`` (False: the Reverb port itself is open too)."""
        return dict(self._doors)

    def checkpoint(self) -> str:
        """Write a checkpoint now; returns its path (needs ``checkpoint_dir``)."""
        if self._dir is None:
            raise RuntimeError("this reverb node has no checkpoint dir (checkpoint: {dir: ...})")
        with self._saving:
            return os.path.realpath(self._jail.request("checkpoint")["path"])

    def save(self) -> bytes:
        """The replay's state for a snapshot: a Reverb checkpoint taken now, as the bytes
        of a tar (see the module's docstring)."""
        return self.capture_state()()

    def capture_state(self) -> Callable[[], bytes]:
        """``save`` in two steps (a snapshot holds the program for the first only): returns
        once Reverb has copied every table, while it goes on writing the checkpoint; the
        function returned waits for that and gives the tar's bytes. Reverb copies all the
        tables first and opens the checkpoint's items file after (``_copied``); the
        writing, which grows with the data, no longer holds the program."""
        before = _entries(self._checkpoints)
        built: Future[bytes] = Future()
        self._saving.acquire()

        def build() -> None:
            try:
                path = os.path.realpath(self._jail.request("checkpoint")["path"])
                try:
                    built.set_result(_packed(path, self._space))
                finally:
                    if self._dir is None:  # a scratch copy: the state holds it now
                        shutil.rmtree(path, ignore_errors=True)
            except BaseException as exc:  # (the state's collect raises it)
                built.set_exception(exc)
            finally:
                self._saving.release()

        threading.Thread(target=build, name="reverb-checkpoint", daemon=True).start()
        while not built.done() and not _copied(self._checkpoints, before):
            time.sleep(COPIED_POLL_S)
        return built.result

    def restore(self, state: bytes) -> None:
        """Serve the tables of a ``save()`` state from now on (its items replace what the
        server holds), behind the same doors."""
        work = tempfile.mkdtemp(prefix="restore-", dir=self._space)
        try:
            checkpoint = _unpacked(state, work)
            root = os.path.join(self._space, f"root-{uuid.uuid4().hex[:8]}")
            with self._saving:
                try:
                    answer = self._jail.request("restore", checkpoint=checkpoint, root=root)
                except JailError:
                    raise
                except RuntimeError as exc:
                    raise ValueError(
                        f"the reverb node could not load the tables of its saved state: {exc}"
                    ) from None
            self._jail.port = int(answer["port"])
            self._warn_if_open()
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def run(self) -> None:
        """Serve until the program stops, checkpointing periodically and at the stop."""
        try:
            every = self._every_s if self._dir is not None else None
            next_at = time.monotonic() + every if every else None
            while not lifecycle.wait_for_stop(WATCH_S):
                if not self._jail.alive():
                    raise JailError("the reverb server's process ended unexpectedly")
                if next_at is not None and time.monotonic() >= next_at:
                    self.checkpoint()
                    next_at = time.monotonic() + (every or 0.0)
            if self._dir is not None:
                self.checkpoint()
        finally:
            self.close()

    def close(self) -> None:
        """Release the writers the rate limiters hold back, end the server's process and
        remove its files (what the node does at the stop; for a server used outside a
        program)."""
        try:
            if self._jail.alive():
                self._jail.request("release")
        finally:
            self._jail.stop()
            shutil.rmtree(self._space, ignore_errors=True)
            self._remove_own_dir()

    def _remove_own_dir(self) -> None:
        if self._own_dir:
            shutil.rmtree(self._own_dir, ignore_errors=True)


STATE_DIR = "checkpoint"  # the one directory in a reverb node's state (a tar)


def _entries(root: str) -> set[str]:
    """The names in the directory ``root`` (none when it does not exist yet)."""
    try:
        return set(os.listdir(root))
    except FileNotFoundError:
        return set()


def _copied(root: str, before: set[str]) -> bool:
    """Whether a checkpoint begun under ``root`` after ``before`` was listed has copied
    its tables: Reverb (0.14; ``TFRecordCheckpointer::Save``) takes each table's copy
    while writing ``tables.tfrecord`` and opens ``items.tfrecord`` only after the last."""
    return any(
        os.path.exists(os.path.join(root, name, ITEMS_FILE)) for name in _entries(root) - before
    )


def _packed(checkpoint: str, space: str) -> bytes:
    """The Reverb checkpoint directory ``checkpoint`` as the bytes of a tar, built in a
    file of ``space`` so that memory holds the result once."""
    fd, tar_path = tempfile.mkstemp(suffix=".tar", dir=space)
    try:
        with os.fdopen(fd, "wb") as f, tarfile.open(fileobj=f, mode="w") as tar:
            tar.add(checkpoint, arcname=STATE_DIR)
        return Path(tar_path).read_bytes()
    finally:
        os.unlink(tar_path)


def _unpacked(state: Any, into: str) -> str:
    """Unpack a ``save()`` state under ``into``; the checkpoint directory's path. A
    clear error for anything else (not bytes, not a tar, no complete checkpoint)."""
    what = "a reverb node's state is the bytes of a tar of a Reverb checkpoint (its save())"
    if not isinstance(state, bytes | bytearray | memoryview):
        raise ValueError(f"{what}; got {type(state).__name__}")
    try:
        with tarfile.open(fileobj=io.BytesIO(state), mode="r:") as tar:
            names = tar.getnames()
            stray = [n for n in names if n != STATE_DIR and not n.startswith(STATE_DIR + "/")]
            if stray or f"{STATE_DIR}/DONE" not in names:
                raise ValueError(
                    f"{what}; this one holds no complete checkpoint "
                    f"({'unexpected ' + repr(stray[:3]) if stray else 'no DONE mark'})"
                )
            tar.extractall(into, filter="data")
    except tarfile.TarError as exc:
        raise ValueError(f"{what}; this one is not a readable tar ({exc})") from None
    return os.path.join(into, STATE_DIR)
