"""The suite's nodes for least privilege (``target: topo.testing.rights_nodes:Name``): a
learner, an actor wired to it, a broker wired to the learner and a rogue, and a rogue
wired to nothing, which tries every way to reach the learner anyway."""

from __future__ import annotations

import os
import time
from typing import Any

from topo.runtime import Handle, PermissionDenied, serve_node
from topo.runtime.auth import refused_count
from topo.runtime.context import current_program
from topo.runtime.lifecycle import current_node


class Trace:
    """Unpickling this creates a file: proof that bytes of a call were unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


class Learner:
    def __init__(self) -> None:
        self.restored = 0

    def ping(self) -> str:
        return "learner"

    def restore(self, *args: Any) -> str:
        self.restored += 1
        return "restored"

    def restores(self) -> int:
        return self.restored

    def refusals(self) -> int:
        """Handshakes this process refused (its ZAP handler's count)."""
        return refused_count()

    def whoami(self) -> tuple[str, int]:
        return current_node().id, os.getpid()


class Actor:
    def __init__(self, learner: Any) -> None:
        self.learner = learner

    def step(self) -> str:
        return str(self.learner.ping())

    def step_futures(self) -> str:
        return str(self.learner.futures.ping().result(30))

    def whoami(self) -> tuple[str, int]:
        return current_node().id, os.getpid()


class Broker:
    """Wired to the learner and the rogue: can pass the one to the other."""

    def __init__(self, learner: Any, rogue: Any) -> None:
        self.learner = learner
        self.rogue = rogue

    def introduce(self) -> bool:
        return bool(self.rogue.take(self.learner))

    def whoami(self) -> tuple[str, int]:
        return current_node().id, os.getpid()


class Rogue:
    """Wired to no node: reaches what it is handed in calls, and tries the rest."""

    def __init__(self) -> None:
        self.given: Any = None

    def reach(self, node_id: str, use_futures: bool = False) -> str:
        """Call ``node_id`` through a handle made by hand (PermissionDenied propagates)."""
        h = Handle(node_id, 30.0)
        return str(h.futures.restore().result(30) if use_futures else h.restore())

    def reach_timed(self, node_id: str) -> tuple[str, float]:
        """What a hand-made handle's call ends with, and how long it took."""
        t0 = time.monotonic()
        try:
            return str(Handle(node_id, 30.0).restore()), time.monotonic() - t0
        except PermissionDenied as exc:
            return f"denied: {exc}", time.monotonic() - t0

    def forge(self, node_id: str, cap: str, trace: str) -> str:
        """Call with a made-up token a payload whose unpickling leaves a file."""
        try:
            return str(Handle(node_id, 30.0, cap=cap).restore(Trace(trace)))
        except PermissionDenied as exc:
            return f"denied: {exc}"

    def take(self, handle: Any) -> bool:
        self.given = handle
        return True

    def use_given(self) -> str:
        return str(self.given.restore())

    def hijack(self, node_id: str) -> str:
        """Register our own address for ``node_id`` (its callers would come to us)."""
        try:
            current_program().address_book.register(node_id, "ipc:///tmp/topo-rogue")
        except PermissionDenied as exc:
            return f"denied: {exc}"
        return "registered"

    def serve_as(self, node_id: str) -> str:
        try:
            serve_node(Learner(), node_id).close()
        except PermissionDenied as exc:
            return f"denied: {exc}"
        return "served"

    def holds(self) -> dict[str, Any]:
        program = current_program()
        grant = program.grant
        return {
            "secret": program.secret,
            "authority": program.authority is not None,
            "serves": sorted(grant.serve) if grant else None,
            "calls": sorted(grant.calls) if grant else None,
        }

    def whoami(self) -> tuple[str, int]:
        return current_node().id, os.getpid()
