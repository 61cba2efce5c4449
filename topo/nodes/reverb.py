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
``checkpoint_dir`` nothing is written: Reverb's own default checkpointer would leave an
empty temporary directory behind for every run.

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
import json
import logging
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable
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
        if self._dir is not None:
            self._dir.mkdir(parents=True, exist_ok=True)
            # The server loads the newest checkpoint in this directory, if any, at start.
            path = str(self._dir)
        else:  # never made: nothing loads from it, and checkpoint() refuses (a
            # reverb.Client's checkpoint() writes there: removed when the node ends)
            path = os.path.join(tempfile.gettempdir(), f"topo-reverb-unused-{uuid.uuid4().hex}")
        self._scratch = path if self._dir is None else None
        program = maybe_current_program()
        self._host = program.bind_host if program is not None else "127.0.0.1"
        key, earlier = remembered_doors(self._host)
        self._own_dir, unix_path = self._unix_path(program, earlier.get("unix"))
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
            self._remove_own_dir()
            raise
        self._doors: dict[str, Any] = {"host": self._host, "unix": unix_path}
        if listener is not None:
            self._doors.update(port=port, gateway=tcp_endpoint(self._host, port))
        self._doors["isolated"] = self._jail.isolated is None
        if self._jail.isolated is not None:
            node = current_node_info()
            print(
                f"topo: WARNING: reverb node {node.id if node else '?'} could not be "
                f"isolated ({self._jail.isolated}): its Reverb port {self._jail.port} is "
                "open to every host and local user that can reach this host",
                flush=True,
            )
        remember_doors(key, self._doors)

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
        return str(self._jail.request("checkpoint")["path"])

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
            self._jail.request("release")
        finally:
            self._jail.stop()
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)
            self._remove_own_dir()

    def _remove_own_dir(self) -> None:
        if self._own_dir:
            shutil.rmtree(self._own_dir, ignore_errors=True)
