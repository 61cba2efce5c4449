"""Launchpad's node types, built into topo's Program IR by ``topo.launchpad.translate``."""

from topo.launchpad.nodes.base import Node, NodeHandle
from topo.launchpad.nodes.kinds import (
    CacherNode,
    CourierNode,
    MultiProcessingColocation,
    MultiThreadingColocation,
    PyClassNode,
    PyNode,
    ReverbHandle,
    ReverbNode,
)

__all__ = [
    "CacherNode",
    "CourierNode",
    "MultiProcessingColocation",
    "MultiThreadingColocation",
    "Node",
    "NodeHandle",
    "PyClassNode",
    "PyNode",
    "ReverbHandle",
    "ReverbNode",
]
