"""``RunRequest``: one run as it was asked for, built once where it is asked.

``topo run`` (through ``topo.api.prepare``), ``topo.launch``/``prepare`` and
``lp.launch`` each make one from what they were given: the compiled program, the backend
(chosen by name with its options, maybe warming up already), the run options, the
record of how the run was started (``run.json``) and, for ``--resume``/``--fork`` or
``start_from``, the snapshot its nodes start from, already read and checked against the
program. The ``Launcher`` takes it whole: nothing below it reads the command line, the
topology file or the snapshot's manifest again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from topo.backends.base import Backend, Guard, Resumed, RunOptions
from topo.ir import Program
from topo.rundir.snapshots import Snapshot

if TYPE_CHECKING:
    from topo.rundir.record import RunRecord


@dataclass(frozen=True)
class RunRequest:
    """A run to start: what runs, where, how, and from what."""

    program: Program
    backend: Backend  # the one it runs on (its own options are in ``record``)
    options: RunOptions = field(
        default_factory=RunOptions
    )  # grace, run directory, log caps, disable_run ...
    record: RunRecord | None = None  # how it was started: run.json (None: not recorded)
    start_from: Snapshot | None = None  # checked against ``program``: nodes start from it
    guard: Guard | None = None  # the backend's (a Slurm job's time limit), started with the run
    resumed: Resumed | None = None  # the guard brought this run back (a requeued job)

    @property
    def params_given(self) -> list[str]:
        """The ``-p`` values the program was made with (``topo apply`` starts from them)."""
        return [] if self.record is None else list(self.record.params_given)
