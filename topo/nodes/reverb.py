"""ReverbServer: the node behind ``kind: reverb``, a dm-reverb replay server.

The server is started in the node's own process (never in the fork server: it starts
threads), on a free port picked on the loopback interface. Reverb's gRPC server has no
authentication and listens on all interfaces of the port it is given; topo only picks
that port and hands its ``host:port`` to the peers that hold a reference to the node,
which turn it into a ``reverb.Client`` (see :func:`topo.kinds.clients.reverb_client`).

With ``checkpoint_dir`` the server restores the latest checkpoint found there when it
starts (so a restarted replay keeps its data), checkpoints every ``checkpoint_every_s``
seconds and once more when the program stops. A relative ``checkpoint_dir`` resolves
against the node's working directory (the group's ``workdir`` if set, else the
directory ``topo run`` was started from), so checkpoints outlive a single run. Without
``checkpoint_dir`` nothing is written: Reverb's own default checkpointer would leave an
empty temporary directory behind for every run.

A restarted reverb node listens on the port its first attempt had (remembered in the
program's address book): the ``reverb.Client``s, writers and datasets of its peers were
made for that address and reconnect by themselves once the server is back. Only if the
port was taken in between does the node take a new one (and say so in its log); peers
then reach it through a new ``reverb.Client`` (restarted peers, or
:meth:`topo.kinds.clients.ReverbClient.reconnect`).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from topo.runtime import lifecycle

# TensorFlow's start-up INFO lines would open every reverb node's log; warnings stay.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import reverb

from topo.targets import load_target

DRAIN_S = 2.0  # at most this long releasing held-back writers at the stop
ADDRESS_KEY = "{node}@reverb"  # the address book entry remembering a node's reverb address
log = logging.getLogger("topo.nodes.reverb")


def free_port(port: int = 0) -> int:
    """A TCP port free on every interface right now (Reverb's server listens on all of
    them): ``port`` itself if it is free, else one the OS picks."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError:
            if not port:
                raise
            s.bind(("", 0))
        return int(s.getsockname()[1])


def remembered_port(host: str) -> tuple[str | None, int]:
    """(address book key, port) of the calling reverb node's earlier attempt on ``host``:
    port 0 for a first attempt, outside a program, or after a move to another host."""
    from topo.runtime.context import current_node_info, maybe_current_program

    program, node = maybe_current_program(), current_node_info()
    if program is None or node is None:
        return None, 0
    key = ADDRESS_KEY.format(node=node.id)
    try:
        earlier = program.address_book.lookup(key)
    except Exception as exc:  # the launcher is busy: a new port, the clients re-resolve
        log.warning("reverb: could not look up the earlier address (%r)", exc)
        return key, 0
    if earlier is None or earlier.rpartition(":")[0] != host:
        return key, 0
    return key, int(earlier.rpartition(":")[2])


def remember_address(key: str | None, address: str) -> None:
    """Publish ``address`` under ``key`` in the program's address book (kept across the
    node's restarts: the registry forgets only node ids when their process ends)."""
    from topo.runtime.context import maybe_current_program

    program = maybe_current_program()
    if key is None or program is None:
        return
    try:
        program.address_book.register(key, address)
    except Exception as exc:
        log.warning("reverb: could not remember the address %s (%r)", address, exc)


def own_address() -> str:
    """The address peers reach this process at: the host's own address where the backend
    spans hosts (ssh), else loopback."""
    from topo.runtime.context import maybe_current_program

    program = maybe_current_program()
    return program.bind_host if program is not None else "127.0.0.1"


class ReverbServer:
    """A Reverb server built from the ``tables`` factory, called with the group's ``args``
    (table sizes, sampler, rate limiter: whatever the factory takes); serves ``address()``
    and ``checkpoint()`` over topo RPC and checkpoints periodically while it runs."""

    def __init__(
        self,
        tables: str | Callable[..., Any],
        checkpoint_dir: str | None = None,
        checkpoint_every_s: float | None = None,
        **table_args: Any,
    ) -> None:
        factory = load_target(tables) if isinstance(tables, str) else tables
        made = factory(**table_args)
        table_list = list(made)
        self._tables = table_list
        if not table_list or not all(isinstance(t, reverb.Table) for t in table_list):
            raise TypeError(f"{tables} must return a non-empty list of reverb.Table, got {made!r}")
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
        checkpointer = reverb.checkpointers.DefaultCheckpointer(path)
        self._host = own_address()
        key, earlier = remembered_port(self._host)
        self._port = free_port(earlier)
        if earlier and self._port != earlier:
            print(
                f"reverb: port {earlier} of the earlier attempt is taken; serving on "
                f"{self._port} (peers holding the old address do not follow)",
                flush=True,
            )
        self._server = reverb.Server(table_list, port=self._port, checkpointer=checkpointer)
        self._client = reverb.Client(self.address())
        remember_address(key, self.address())

    def address(self) -> str:
        """The ``host:port`` reverb clients connect to."""
        return f"{self._host}:{self._port}"

    def checkpoint(self) -> str:
        """Write a checkpoint now; returns its path (needs ``checkpoint_dir``)."""
        if self._dir is None:
            raise RuntimeError("this reverb node has no checkpoint dir (checkpoint: {dir: ...})")
        return str(self._client.checkpoint())

    def run(self) -> None:
        """Serve until the program stops, checkpointing periodically and at the stop."""
        try:
            every = self._every_s if self._dir is not None else None
            while not lifecycle.wait_for_stop(every):
                self.checkpoint()
            if self._dir is not None:
                self.checkpoint()
            self._release_writers()
        finally:
            self._server.stop()
            if self._scratch is not None:
                shutil.rmtree(self._scratch, ignore_errors=True)

    def _release_writers(self, within_s: float = DRAIN_S, calm_s: float = 0.3) -> None:
        """At the stop, let writers that a rate limiter holds back finish: while a table
        refuses inserts (its sample-to-insert ratio wants samples first), sample and drop
        items. Peers see the stop between writes and end their loops; a client still
        blocked inside Reverb when its server closes can abort its whole process (with
        the threads backend, the launcher). Ends after ``calm_s`` without a held-back
        table, or after ``within_s`` (inside the default grace period)."""
        end = time.monotonic() + within_s
        calm_since = time.monotonic()
        while time.monotonic() < end:
            held = [t.name for t in self._tables if not t.can_insert(1) and t.can_sample(1)]
            if not held:
                if time.monotonic() - calm_since >= calm_s:
                    return
                time.sleep(0.02)
                continue
            calm_since = time.monotonic()
            for name in held:  # one at a time: a sample the limiter refuses would block
                # as stored: items of scalar columns (a trajectory writer's squeezed
                # steps, as Acme's and Mava's adders write) do not split into timesteps
                next(iter(self._client.sample(name, num_samples=1, emit_timesteps=False)))
