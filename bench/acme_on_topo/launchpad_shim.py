"""The scratch ``launchpad`` package of bench/acme_on_topo.sh (copied there as
``launchpad/__init__.py``): ``import launchpad`` is ``topo.launchpad``, and its
submodules (``launchpad.nodes.python.local_multi_processing``, ...) are topo's."""

import sys

from topo.launchpad import *  # noqa: F403
from topo.launchpad import __all__  # noqa: F401

for _name, _module in list(sys.modules.items()):
    if _name.startswith("topo.launchpad."):
        sys.modules["launchpad." + _name.removeprefix("topo.launchpad.")] = _module
