"""Test-only plug-in backends, registered the way an installed distribution registers
one: an entry point of group ``topo.backends`` in a dist-info (``install``) on the
import path of a ``topo`` subprocess. They declare command-line options
(``Backend.options``) and a part of ``topo plan`` (``Backend.placement_text``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from topo.backends.base import BackendOption
from topo.backends.procs import ProcsBackend
from topo.backends.ssh.backend import SshBackend
from topo.backends.ssh.inventory import load_inventory
from topo.backends.threads import ThreadsBackend
from topo.diagnostics import TopoError
from topo.ir import Program

ENTRY_POINTS = {
    "optplug": "bk_plugins:OptionBackend",
    "journal": "bk_plugins:Journal",
    "ssh-stand-in": "bk_plugins:SshStandIn",
    "subprocs": "bk_subprocs:Subprocesses",  # passes the conformance suite
    "procs": "bk_plugins:OptionBackend",  # a plug-in cannot take the name of topo's own
}


def install(site: Path) -> Path:
    """A dist-info in ``site`` (made if missing) registering the backends above; put
    ``site`` and this folder on PYTHONPATH and ``topo`` finds them by name."""
    site.mkdir(parents=True, exist_ok=True)
    info = site / "topo_test_plugins-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: topo-test-plugins\nVersion: 0.1\n")
    lines = [f"{name} = {target}" for name, target in ENTRY_POINTS.items()]
    (info / "entry_points.txt").write_text("[topo.backends]\n" + "\n".join(lines) + "\n")
    return site


class OptionBackend(ThreadsBackend):
    """threads, with options: it writes what it was given to the file ``out``."""

    name = "optplug"

    @classmethod
    def options(cls) -> tuple[BackendOption, ...]:
        return (
            BackendOption("greeting", "what to write to --out", required=True),
            BackendOption("out", "the file the options are written to", Path, required=True),
            BackendOption("times", "how many times", int),
            BackendOption("loud", "shout it", bool),
        )

    def __init__(self, greeting: str, out: Path, times: int = 1, loud: bool = False) -> None:
        super().__init__()
        given = {"greeting": greeting, "out": str(out), "times": times, "loud": loud}
        Path(out).write_text(json.dumps(given))

    @classmethod
    def placement_text(cls, program: Program, **options: Any) -> str | None:
        where = ", ".join(e.id for e in program.executables)
        return f"optplug would greet {options['greeting']!r} in threads: {where}"


class Journal(ProcsBackend):
    """procs, writing to the file ``journal`` its fork server's pid when it warms up and
    ``closed`` when it is closed: what the one launch path does with a warmed backend."""

    name = "journal"

    @classmethod
    def options(cls) -> tuple[BackendOption, ...]:
        return (BackendOption("journal", "the file to write to", Path, required=True),)

    def __init__(self, journal: Path) -> None:
        super().__init__()
        self.journal = Path(journal)

    def _write(self, line: str) -> None:
        with self.journal.open("a") as out:
            out.write(line + "\n")

    def warm_up(self) -> bool:
        started = super().warm_up()
        self._write(f"warm {self.server_pid}")
        return started

    def close(self) -> None:
        super().close()
        self._write("closed")


class SshStandIn(SshBackend):
    """The ssh backend's options (inherited) and inventory, stopping before any host is
    dialled: what ``topo run`` hands ``--hosts`` and ``--ship`` to."""

    name = "ssh-stand-in"

    def __init__(self, hosts: Path, ship: bool = False) -> None:
        inventory = load_inventory(hosts)
        raise TopoError.one(
            f"stand-in: {len(inventory.hosts)} hosts read from {Path(hosts).name} "
            f"(ship={ship}), stopping here"
        )
