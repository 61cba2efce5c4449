"""Inventories of made-up hosts for the tests that place executables without starting
anything (10.0.0.1, 10.0.0.2, ... that nobody dials)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from topo.backends.ssh.inventory import HostSpec, Inventory


def made_up(hosts: dict[str, dict[str, Any]]) -> Inventory:
    """One host per key, the i-th addressed 10.0.0.<i+1>, with its value's fields
    (``labels``, ``capacity``, ``accelerators``...) over a root login's defaults."""
    return Inventory(
        tuple(
            HostSpec(
                name=name,
                address=f"10.0.0.{i + 1}",
                port=22,
                user="root",
                key=None,
                known_hosts=Path("/dev/null"),
                python="/usr/bin/python3",
                workdir="/tmp/w",
                **fields,
            )
            for i, (name, fields) in enumerate(hosts.items())
        )
    )
