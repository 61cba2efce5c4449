"""Built-in nodes: ``topo.nodes:Counter``, ``topo.nodes:StepsLimiter``, the cacher."""

from topo.nodes.cacher import Cacher
from topo.nodes.counter import Counter
from topo.nodes.limiter import StepsLimiter

__all__ = ["Cacher", "Counter", "StepsLimiter"]
