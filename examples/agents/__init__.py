"""Node code behind the example topologies in ``examples/topologies/``."""
