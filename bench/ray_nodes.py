"""Nodes of ``bench/ray_bench.py`` (kept light: every Ray actor and fork server imports it).

``Trivial`` is the launch benchmark's node; ``Caller`` times blocking calls to ``Echo``
inside the program (node to node, as a program's own traffic goes); ``RayCaller`` and
``RayEcho`` do the same with plain Ray actor method calls, the figure Ray users know.
"""

from __future__ import annotations

import time
from typing import Any


def payload(size: int) -> Any:
    """What one call sends: the int 1 (``size`` 0), else ``size`` bytes of float64."""
    if not size:
        return 1
    import numpy as np

    return np.ones(size // 8)


class Trivial:
    """A trivial courier node."""

    def ping(self) -> int:
        return 1


class Echo:
    """Returns what it is sent."""

    def echo(self, x: Any) -> Any:
        return x


class Caller:
    """Times ``calls`` blocking calls to the echo node (a topo handle, ``@echo``)."""

    def __init__(self, echo: Any) -> None:
        self.echo = echo

    def measure(self, calls: int, size: int) -> list[float]:
        """Seconds per call, call by call."""
        x = payload(size)
        out = []
        for _ in range(calls):
            t0 = time.perf_counter()
            self.echo.echo(x)
            out.append(time.perf_counter() - t0)
        return out


class RayEcho:
    """A plain Ray actor that returns what it is sent."""

    def echo(self, x: Any) -> Any:
        return x

    def where(self) -> str:
        """The Ray node's address."""
        import ray

        return str(ray.util.get_node_ip_address())

    def pid_where(self) -> tuple[int, str]:
        """This process's pid and the Ray node's address."""
        import os

        return os.getpid(), self.where()


class RayCaller(RayEcho):
    """A plain Ray actor timing ``ray.get(echo.echo.remote(x))`` round trips."""

    def measure(self, echo: Any, calls: int, size: int) -> list[float]:
        """Seconds per call, call by call."""
        import ray

        x = payload(size)
        out = []
        for _ in range(calls):
            t0 = time.perf_counter()
            ray.get(echo.echo.remote(x))
            out.append(time.perf_counter() - t0)
        return out
