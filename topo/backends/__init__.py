"""Backends: a compiled ``Program`` in, a running program out.

``get_backend(name, **options)`` returns a backend from one table, the
``topo.backends`` entry-point group (topo's own threads, procs, ssh and ray are
registered there as plug-ins are); ``Launcher`` (the supervision loop shared by
every backend) starts, watches, restarts and stops it; ``topo.api`` (``prepare``,
``topo.launch``) is the Python API on top. A new backend subclasses ``Backend``
(declaring its command-line options with ``BackendOption``); see ``base`` for the
seams it fills in.

The names below are imported on first use: processes that only need a submodule
(the ssh backend's remote agent, the fork server) do not pay for the runtime's
imports (zmq, numpy) before they need them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topo.backends.base import (
        Backend,
        BackendNotFound,
        BackendOption,
        BackendOptionError,
        Event,
        ExecutableRunner,
        Network,
        RunOptions,
        available_backends,
        get_backend,
    )

__all__ = [
    "Backend",
    "BackendNotFound",
    "BackendOption",
    "BackendOptionError",
    "Event",
    "ExecutableRunner",
    "Network",
    "RunOptions",
    "available_backends",
    "get_backend",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("topo.backends.base"), name)
    raise AttributeError(f"module 'topo.backends' has no attribute {name!r}")
