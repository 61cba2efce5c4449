"""Node code for the least-privilege tests: a learner, an actor wired to it, a broker
wired to both the learner and a rogue, and a rogue wired to nothing."""

from __future__ import annotations

import hashlib
import os
import re
import time
from typing import Any

import topo
from topo.runtime import Handle, PermissionDenied, serve_node
from topo.runtime.auth import refused_count
from topo.runtime.context import current_program


class Trace:
    """Unpickling this creates a file: proof that bytes were unpickled."""

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
        return topo.current_node().id, os.getpid()


class Actor:
    def __init__(self, learner: Any) -> None:
        self.learner = learner

    def step(self) -> str:
        return str(self.learner.ping())

    def step_futures(self) -> str:
        return str(self.learner.futures.ping().result(30))

    def whoami(self) -> tuple[str, int]:
        return topo.current_node().id, os.getpid()

    def crash(self) -> None:
        os._exit(3)


class Broker:
    """Wired to the learner and the rogue: can pass the one to the other."""

    def __init__(self, learner: Any, rogue: Any) -> None:
        self.learner = learner
        self.rogue = rogue

    def introduce(self) -> bool:
        return bool(self.rogue.take(self.learner))

    def whoami(self) -> tuple[str, int]:
        return topo.current_node().id, os.getpid()


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

    def memory_holds(self, digests: list[str]) -> list[str]:
        """Which of the tokens whose sha256 ``digests`` are given appear in this process's
        writable memory (the tokens themselves are never passed here)."""
        wanted = set(digests)
        found: set[str] = set()
        hexrun = re.compile(rb"[0-9a-f]{64,}")
        with open("/proc/self/maps") as maps, open("/proc/self/mem", "rb", 0) as mem:
            for line in maps:
                fields = line.split()
                if len(fields) < 2 or "rw" not in fields[1]:
                    continue
                start, end = (int(x, 16) for x in fields[0].split("-"))
                try:
                    mem.seek(start)
                    data = mem.read(end - start)
                except (OSError, ValueError, OverflowError):
                    continue
                for m in hexrun.finditer(data):
                    run = m.group()
                    for i in range(len(run) - 63):
                        digest = hashlib.sha256(run[i : i + 64]).hexdigest()
                        if digest in wanted:
                            found.add(digest)
        return sorted(found)

    def whoami(self) -> tuple[str, int]:
        return topo.current_node().id, os.getpid()

    def crash(self) -> None:
        os._exit(3)


def probe(rogue: Any, broker: Any) -> None:
    """A py node: what the rogue reaches by itself, then through a handle it was passed."""
    text, took = rogue.reach_timed("learner")
    print(f"alone: {text} ({took:.2f}s)", flush=True)
    broker.introduce()
    print(f"handed: {rogue.use_given()}", flush=True)
