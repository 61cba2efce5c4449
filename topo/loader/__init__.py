"""Stage 1, load: YAML text -> validated Spec (params, interpolation, extends, positions)."""

from topo.loader.models import GroupSpec, TopologySpec
from topo.loader.read import LoadedSpec, load_spec

__all__ = ["GroupSpec", "LoadedSpec", "TopologySpec", "load_spec"]
