"""Launchpad's ``launchpad.nodes.python`` modules, for imports that name them."""

from topo.launchpad.nodes.kinds import PyClassNode, PyNode
from topo.launchpad.nodes.python.local_multi_processing import PythonProcess

__all__ = ["PyClassNode", "PyNode", "PythonProcess"]
