"""How much accelerator memory a node's process holds, as a metric of the node.

A process given accelerators reports, every ``EVERY_S`` seconds, the memory in use on
the devices JAX opened for it (``device_memory_mib``, summed over its devices, and
``device_memory_peak_mib``), where the platform says it (``Device.memory_stats``:
GPUs and TPUs do, the CPU does not). It never opens a device itself: until the node's
code has started JAX's backend it reports nothing. Rows go the way of every metric row
(``topo.runtime.metrics``): status.json, the live table, the dashboard.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from topo.runtime import metrics

EVERY_S = 10.0
LABEL = "device"
MIB = 2**20


def in_use() -> dict[str, float] | None:
    """``{"device_memory_mib": ..., "device_memory_peak_mib": ...}`` over the devices
    this process's JAX opened (not the CPU); None while it has opened none, or where the
    platform does not say."""
    if "jax" not in sys.modules:
        return None
    try:
        from jax._src import xla_bridge

        if not xla_bridge.backends_are_initialized():
            return None
        import jax

        devices = [d for d in jax.local_devices() if d.platform != "cpu"]
    except Exception:  # another JAX, or its backend failed: nothing to say
        return None
    used, peak, said = 0, 0, False
    for device in devices:
        try:
            stats = device.memory_stats()
        except Exception:
            stats = None
        if not stats or "bytes_in_use" not in stats:
            continue
        said = True
        used += int(stats["bytes_in_use"])
        peak += int(stats.get("peak_bytes_in_use", stats["bytes_in_use"]))
    if not said:
        return None
    return {
        "device_memory_mib": round(used / MIB, 1),
        "device_memory_peak_mib": round(peak / MIB, 1),
    }


def watch(
    book: Any,
    node: str,
    stop: threading.Event,
    read: Callable[[], dict[str, float] | None] = in_use,
) -> threading.Thread:
    """Report ``read()`` as rows of ``node`` through ``book`` (the process's address
    book) every ``EVERY_S`` seconds until ``stop`` is set; the thread (a daemon)."""

    def loop() -> None:
        while not stop.wait(EVERY_S):
            figures = read()
            if figures is not None:
                metrics.ship(book, {"time": time.time(), "node": node, "label": LABEL, **figures})

    thread = threading.Thread(target=loop, name="topo-device-memory", daemon=True)
    thread.start()
    return thread
