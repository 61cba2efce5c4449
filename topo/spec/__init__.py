"""Stage 1, load: YAML text -> validated Spec (params, interpolation, extends, positions)."""

from topo.spec.loader import LoadedSpec, load_spec
from topo.spec.models import GroupSpec, TopologySpec

__all__ = ["GroupSpec", "LoadedSpec", "TopologySpec", "load_spec"]
