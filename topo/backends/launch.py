"""Deprecated: ``topo.launch``, ``RunningProgram`` and ``load`` live in ``topo.api``."""

from __future__ import annotations

import warnings

from topo.api import RunningProgram, launch, load

warnings.warn("topo.backends.launch moved to topo.api", DeprecationWarning, stacklevel=2)

__all__ = ["RunningProgram", "launch", "load"]
