"""The ssh backend: one topology across the hosts of an inventory file, over SSH.

``inventory`` (the ``--hosts`` file) and ``placement`` (which host runs which
executable) are pure and import no SSH library, so ``topo plan --backend ssh``
works without the ssh extra.
"""
