"""What the ray backend keeps per started actor: the runner the launcher holds (kill,
stacks) and the calls in flight that the backend's watcher follows."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from topo.backends.base import ExecutableRunner
from topo.backends.logs import safe_name

LOGS_EVERY_S = 0.25  # how often the watcher pulls the actors' new output


class RayRunner(ExecutableRunner):
    """One attempt of one executable as a Ray actor (``kill`` is ``ray.kill``)."""

    def __init__(self, exe: str, attempt: int, actor: Any) -> None:
        self.exe = exe
        self.attempt = attempt
        self.pid = 0
        self.node_ip: str | None = None
        self.actor = actor
        self.killed = False

    def kill(self) -> None:
        import ray

        self.killed = True
        if self.actor is not None:
            ray.kill(self.actor, no_restart=True)

    def dump_stacks(self, node: str) -> str:
        import ray

        if self.actor is None or not self.pid:
            return ""
        try:
            ray.get(self.actor.dump_stacks.remote(), timeout=2)
        except Exception:
            return ""
        time.sleep(LOGS_EVERY_S * 2)  # let the watcher pull the dump before the kill
        return f"(the stacks of its threads are in its log, logs/{safe_name(node)}.log)"


@dataclass
class Live:
    """One actor the watcher follows, and its calls in flight."""

    runner: RayRunner
    run_ref: Any
    where_ref: Any | None
    log_ref: Any | None = None


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (Ray's run on for paragraphs)."""
    text = str(exc).strip()
    return text.splitlines()[0].strip() if text else type(exc).__name__
