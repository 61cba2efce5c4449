"""A node's state for snapshots: the launcher's door into a node server (pause, save,
resume; collect, for a node that captures its state while held and builds it after;
stacks, for ``topo stacks``) and the restore of a state into a new node object.

Only the launcher may use the door: each call carries a proof derived from the node's
CURVE server secret, which only the node's own executable and the launcher hold (a
peer holds the right to call the node, never its server secret). A state leaves the
node as pickled bytes; the launcher stores them as they are and never unpickles them.
"""

from __future__ import annotations

import hashlib
import hmac
import pickle
from collections.abc import Callable
from typing import Any

from topo.runtime.errors import PermissionDenied
from topo.runtime.pause import gate_of
from topo.runtime.stacks import thread_stacks

STATE_METHOD = "__topo_state__"
# What ``save`` answers for a node whose state is built after the pause (``captures``):
# the launcher lets the program go, then asks for it with ``collect``.
LATER = "topo:state-follows"


def state_proof(server_secret: str) -> str:
    """What the launcher shows a node to pause, save or resume it."""
    return hashlib.sha256(b"topo-node-state\0" + server_secret.encode()).hexdigest()


def has_state(obj: Any) -> bool:
    """Whether a node object keeps a state topo can snapshot (``save`` and ``restore``)."""
    return callable(getattr(obj, "save", None)) and callable(getattr(obj, "restore", None))


def captures(obj: Any) -> bool:
    """Whether a node object takes its state in two steps: ``capture_state()`` while the
    program is held (only what must be of that moment: quick), returning a function that
    builds the state (what ``save`` would return) after the program has been let go."""
    return has_state(obj) and callable(getattr(obj, "capture_state", None))


class StateDoor:
    """Served as ``__topo_state__`` on every node server."""

    def __init__(self, obj: Any, node_id: str, proof: str) -> None:
        self._obj = obj
        self._node_id = node_id
        self._proof = proof
        self._follows: Callable[[], Any] | None = None  # what capture_state() returned

    def __call__(self, proof: str, op: str, *args: Any) -> Any:
        if not isinstance(proof, str) or not hmac.compare_digest(proof, self._proof):
            raise PermissionDenied(
                "-", self._node_id, f"only the launcher may {op} node {self._node_id!r}"
            )
        gate = gate_of(self._node_id)
        if op == "pause":  # -> the names of the node's threads still moving after timeout
            return gate.pause(float(args[0]))
        if op == "resume":
            gate.resume()
            return None
        if op == "debug":  # -> its pdb session at a breakpoint (topo debug)
            from topo.runtime.debugger import door

            return door(self._node_id, *args)
        if op in ("stacks", "stacks-all"):  # -> the threads' stacks of its process
            return thread_stacks(everything=op == "stacks-all")
        if op == "has_state":  # -> whether a change that ends it loses a state
            return has_state(self._obj)
        if op == "save":  # -> pickled state, LATER, or None for a node that keeps none
            if not has_state(self._obj):
                return None
            if captures(self._obj):
                follows = self._obj.capture_state()
                if not callable(follows):
                    raise TypeError(
                        f"{type(self._obj).__qualname__}.capture_state() returned "
                        f"{type(follows).__name__}, not a function that builds the state"
                    )
                self._follows = follows
                return LATER
            return pickle.dumps(self._obj.save(), protocol=5)
        if op == "collect":  # -> the pickled state of the last capture
            follows, self._follows = self._follows, None
            if follows is None:
                raise RuntimeError(f"node {self._node_id!r} has no captured state to collect")
            return pickle.dumps(follows(), protocol=5)
        raise ValueError(f"unknown state operation {op!r}")


def restore(obj: Any, node_id: str, data: bytes) -> None:
    """Give a newly built node object the state it saved (before it serves or runs)."""
    if not callable(getattr(obj, "restore", None)):
        raise TypeError(
            f"node {node_id!r} has a saved state in the snapshot, but its class "
            f"{type(obj).__qualname__} has no restore(state) method to take it"
        )
    obj.restore(pickle.loads(data))
