"""The ``topo`` console script (and ``python -m topo``).

For ``topo run`` on the procs backend (the default) the fork server is started first,
before the command line interface imports typer, rich and pydantic: the server's own
imports then overlap with everything the launcher does before it needs the server.
``topo run`` claims that backend (``take_warm``); one it does not claim (a usage error,
``--help``, another backend) is closed at exit. Any other command goes straight to
``topo.cli``.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from topo.backends.base import Backend

_warm: Backend | None = None


def backend_of_run(args: list[str]) -> str | None:
    """The backend ``topo run`` is asked for by ``args`` (the command line after the
    program name): "procs" when none is named; None when ``args`` is not ``topo run``."""
    if not args or args[0] != "run":
        return None
    backend = "procs"
    rest = iter(args[1:])
    for arg in rest:
        if arg in ("-h", "--help"):
            return None
        if arg == "--":
            break
        if arg in ("-b", "--backend"):
            backend = next(rest, backend)
        elif arg.startswith("--backend="):
            backend = arg.partition("=")[2]
        elif arg.startswith("-b"):
            backend = arg[2:]
    return backend


def take_warm(backend: str) -> Backend | None:
    """The backend this command started early, if it is ``backend``; the caller owns it
    from then on (it is handed out once)."""
    global _warm
    warm, _warm = _warm, None
    if warm is not None and warm.name != backend:
        warm.close()
        return None
    return warm


def main() -> None:
    """Console-script entry point: ``topo.cli.main`` after the early start."""
    global _warm
    if backend_of_run(sys.argv[1:]) == "procs":
        from topo.backends.procs import ProcsBackend

        _warm = ProcsBackend()
        _warm.warm_up()
    try:
        from topo.cli import main as cli_main

        cli_main()
    finally:
        if _warm is not None:  # not claimed by topo run
            _warm.close()
            _warm = None
