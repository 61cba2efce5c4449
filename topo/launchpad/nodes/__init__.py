"""Launchpad's node types, built into topo's Program IR by ``topo.launchpad.compile``."""

from topo.launchpad.nodes.base import Handle, Node
from topo.launchpad.nodes.kinds import (
    CacherNode,
    CourierNode,
    MultiProcessingColocation,
    MultiThreadingColocation,
    PyClassNode,
    PyNode,
    ReverbNode,
)

__all__ = [
    "CacherNode",
    "CourierNode",
    "Handle",
    "MultiProcessingColocation",
    "MultiThreadingColocation",
    "Node",
    "PyClassNode",
    "PyNode",
    "ReverbNode",
]
