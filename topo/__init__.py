"""topo: a declarative topology compiler and launcher for distributed Python programs.

The node-facing API (``topo.stop()``, ``topo.current_node()``, ...) lives in
``topo.runtime`` and is imported lazily, so ``topo validate`` never pays for
the transport libraries.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> module that defines it; resolved on first attribute access.
_LAZY: dict[str, str] = {
    "stop": "topo.runtime.lifecycle",
    "wait_for_stop": "topo.runtime.lifecycle",
    "stop_event": "topo.runtime.lifecycle",
    "current_node": "topo.runtime.lifecycle",
    "pausepoint": "topo.runtime.pause",
    "pausable": "topo.runtime.pause",
    "batched": "topo.runtime.batching",
    "PeerUnavailable": "topo.runtime.errors",
    "PermissionDenied": "topo.runtime.errors",
    "RemoteError": "topo.runtime.errors",
    "launch": "topo.api",
    "load": "topo.api",
}


def __getattr__(name: str) -> Any:
    if name == "metrics":  # the node-facing metrics loggers: topo.metrics.logger(...)
        return importlib.import_module("topo.runtime.metrics")
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'topo' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = ["__version__", "metrics", *_LAZY]
