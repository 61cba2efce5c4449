"""The ``ray`` backend: one Ray actor per executable, topo's RPC between them.

``backend`` (``RayBackend``: the cluster connection, actors, log streaming),
``placement`` (what each executable asks of a Ray node, placement groups, the
feasibility check) and ``actor`` (the actor class, imported in Ray workers).
"""
