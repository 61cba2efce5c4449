"""SIGTERM as a notice, not an end, for topo's own processes in a Slurm job's step.

At a preemption with a partition's ``GraceTime``, Slurm sends SIGTERM to every process
of the job's steps -- topo's agents, their fork servers, the executables and what they
started -- and ends the job only when the grace is over. Where the launcher acts on
that notice (a snapshot, then a clean stop: ``topo.backends.slurm.guard``), the slurm
backend starts its agents with ``HOLD_ENV`` set; there each of topo's processes (the
agent, its fork server, every executable's process, a Reverb jail) keeps running at a
SIGTERM (``hold_sigterm``) and the agent tells the launcher. Without ``HOLD_ENV``
(threads, procs, ssh, ray, a Slurm run nobody guards) nothing changes.

The handler is a Python one, not ``SIG_IGN``: a program an executable ``exec``s gets
the default again, and a process forked from an executable without ``exec`` (a
``multiprocessing`` worker) ends at SIGTERM as it would have -- only the process that
set the handler holds.
"""

from __future__ import annotations

import os
import signal
from types import FrameType

HOLD_ENV = "TOPO_HOLD_SIGTERM"  # "1": this process tree's SIGTERM is a notice (Slurm)


def holds_sigterm(env: dict[str, str] | None = None) -> bool:
    """Whether topo's processes here hold SIGTERM (``HOLD_ENV`` is set)."""
    return (os.environ if env is None else env).get(HOLD_ENV) == "1"


def hold_sigterm() -> bool:
    """Where ``HOLD_ENV`` says so, make SIGTERM a notice this process lives through
    (from the main thread); whether it did."""
    if not holds_sigterm():
        return False
    owner = os.getpid()

    def held(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner:  # forked from it without exec: the default, an end
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    signal.signal(signal.SIGTERM, held)
    return True
