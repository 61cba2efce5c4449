"""Backends: a compiled ``Program`` in, a running program out.

``get_backend(name)`` returns the backend; ``Launcher`` (the supervision loop
shared by every backend) starts, watches, restarts and stops it;
``topo.launch`` is the Python API on top.
"""

from topo.backends.base import (
    Backend,
    Event,
    ExecutableRunner,
    RunOptions,
    available_backends,
    get_backend,
)

__all__ = [
    "Backend",
    "Event",
    "ExecutableRunner",
    "RunOptions",
    "available_backends",
    "get_backend",
]
