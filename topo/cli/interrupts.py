"""Ctrl-C and SIGTERM heard without a lock in the signal handler: ``topo.backends.interrupts``
(where the slurm backend hears its job's warning with it too), named here for the commands."""

from topo.backends.interrupts import Interrupts

__all__ = ["Interrupts"]
