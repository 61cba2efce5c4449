"""Ctrl-C and SIGTERM heard without a lock in the signal handler: ``topo.interrupts``
(where the backends reach it too), named here for the commands."""

from topo.interrupts import Interrupts

__all__ = ["Interrupts"]
