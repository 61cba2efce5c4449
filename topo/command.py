"""The ``topo`` console script (and ``python -m topo``).

For ``topo run`` on the procs backend (the default) the fork server is started first,
before the command line interface imports typer, rich and pydantic: the server's own
imports then overlap with everything the launcher does before it needs the server.
The run takes that backend over (``topo.api.prepare``); one no run took (a usage error,
``--help``) is closed at exit. Any other command goes straight to ``topo.cli``.
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point: ``topo.cli.main`` after the early start."""
    from topo.api import close_early, named_backend, warm_early

    args = sys.argv[1:]
    # `topo run -d` only starts the launcher, which warms its own backend.
    if args[:1] == ["run"] and not {"-h", "--help", "-d", "--detach"} & set(args):
        if named_backend(args[1:]) == "procs":
            from topo.backends.procs import ProcsBackend

            warm_early(ProcsBackend())
    try:
        from topo.cli import main as cli_main

        cli_main()
    finally:
        close_early()  # not taken by topo run
