"""What ``topo run`` reads of its command line before the command line interface loads.

``named_backend`` is the one reading of ``--backend``: the console script
(``topo.command``) uses it to start the procs fork server before typer, rich and
pydantic are imported, and ``BackendCommand`` to find the options of the backend named.
The backend started that early travels to the command as an ``EarlyBackend`` (click's
context object): ``topo run`` takes it when it runs on it, and the console script closes
it when no run took it (a usage error, ``--help``). The standard library only: this
module is imported before anything else of the command line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from topo.backends.base import Backend

RUN_BACKEND = "procs"  # what `topo run` runs on when no --backend is given
BACKEND_FLAGS = ("-b", "--backend")


def named_backend(args: Sequence[str], default: str | None = RUN_BACKEND) -> str | None:
    """The backend a command line names with ``-b NAME``, ``-bNAME``, ``--backend NAME``
    or ``--backend=NAME`` (the last one given; ``default`` when none is). ``args`` are the
    words after the command's name."""
    name = default
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            break
        if arg in BACKEND_FLAGS:
            name = next(rest, name)
        elif arg.startswith("--backend="):
            name = arg.partition("=")[2]
        elif arg.startswith("-b") and not arg.startswith("--"):
            name = arg[2:]
    return name


class EarlyBackend:
    """A backend warmed up before the command line was parsed, until a run takes it."""

    def __init__(self, backend: Backend) -> None:
        backend.warm_up()
        self._backend: Backend | None = backend

    def take(self, name: str, options: Mapping[str, Any]) -> Backend | None:
        """The early backend if the run is on it (``name``, and no options of its own);
        else None, and the early one ends now rather than at exit."""
        early, self._backend = self._backend, None
        if early is None or (early.name == name and not options):
            return early
        early.close()
        return None

    def close(self) -> None:
        """End the early backend if no run took it."""
        early, self._backend = self._backend, None
        if early is not None:
            early.close()
