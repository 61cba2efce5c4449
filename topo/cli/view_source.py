"""``RunSource``: what the live views of ``topo run`` and ``topo attach`` read of a run.

A launcher's ``RunState`` satisfies it; ``topo attach`` fills one from a run's ``status.json``
(``Launcher.summary`` writes every value named here) and its saved topology.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from topo.runs.node_status import LimiterProgress, NodeStatus


class RunSource(Protocol):
    """What the views read of a run (a launcher's ``RunState`` has all of it; ``topo attach``
    fills it from ``status.json``). Every value is read, never changed."""

    @property
    def program_name(self) -> str:
        """The name of the run's program (the table's title)."""

    @property
    def backend_name(self) -> str:
        """``procs``, ``threads``, ``ssh``..."""

    @property
    def run_dir(self) -> Path:
        """The run directory (logs, status.json)."""

    @property
    def grace_s(self) -> float:
        """Seconds nodes get to stop before they are killed."""

    @property
    def nodes(self) -> dict[str, NodeStatus]:
        """Node id -> its status (state, pid, phase, last line, metrics...)."""

    @property
    def stopping_since(self) -> float | None:
        """Wall-clock time the stop began (None while the run goes on)."""

    @property
    def generation(self) -> int:
        """How many changes ``topo apply`` made to the run's program (0: none)."""

    @property
    def limiter(self) -> LimiterProgress | None:
        """How far a steps limiter got (None: no limiter, or none reported yet)."""

    def device(self, exe_id: str) -> str | None:
        """The accelerators an executable was given (``gpu 0``; None: none)."""

    def location(self, exe_id: str) -> str | None:
        """The host of an executable for a backend that spans hosts, else None."""
