"""Backends: a compiled ``Program`` in, a running program out.

``get_backend(name, **options)`` returns a backend from one table (the built-in
ones, and third-party ones from the ``topo.backends`` entry-point group);
``Launcher`` (the supervision loop shared by every backend) starts, watches,
restarts and stops it; ``topo.api`` (``topo.launch``) is the Python API on top.
A new backend subclasses ``Backend``; see ``base`` for the seams it fills in.
"""

from topo.backends.base import (
    Backend,
    BackendNotFound,
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
    "Event",
    "ExecutableRunner",
    "Network",
    "RunOptions",
    "available_backends",
    "get_backend",
]
