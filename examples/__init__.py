"""topo examples: the node code behind examples/topologies (a regular package, so that
another top-level ``examples`` installed by a dependency cannot shadow it)."""
