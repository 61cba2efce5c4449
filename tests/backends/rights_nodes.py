"""The least-privilege nodes of the conformance suite (``topo.testing.rights_nodes``),
with what the procs-only test needs: a crash on request, and a scan of the process's
memory for tokens."""

from __future__ import annotations

import hashlib
import os
import re

from topo.testing import rights_nodes
from topo.testing.rights_nodes import Broker, Learner

__all__ = ["Actor", "Broker", "Learner", "Rogue"]


class Actor(rights_nodes.Actor):
    def crash(self) -> None:
        os._exit(3)


class Rogue(rights_nodes.Rogue):
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

    def crash(self) -> None:
        os._exit(3)
