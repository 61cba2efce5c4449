"""The ``topo`` console script (and ``python -m topo``): the edge where the command line
is read.

For ``topo run`` on the procs backend (the default) the fork server is started first,
before the command line interface imports typer, rich and pydantic: the server's own
imports then overlap with everything the launcher does before it needs the server.
The backend is read from the words here (``topo.cli.early.named_backend``, the same
reading ``topo run`` makes) and handed to the command as an ``EarlyBackend``; one no run
took (a usage error, ``--help``) is closed at exit. ``topo --version`` answers without
importing the command line interface at all. Any other command goes straight to
``topo.cli``, which imports only the module of the command given (``topo.cli.lazy``).
"""

from __future__ import annotations

import sys


def main() -> None:
    """Console-script entry point: ``topo.cli.main`` after the early start. Ctrl-C before
    a command handles it exits 130 without a traceback."""
    args = sys.argv[1:]
    if args in (["--version"], ["-V"]):
        import topo

        print(f"topo {topo.__version__}")
        return
    try:
        _main(args)
    except KeyboardInterrupt:
        sys.exit(130)


def _main(args: list[str]) -> None:
    from topo.cli import main as cli_main

    # `topo run -d` only starts the launcher, which warms its own backend.
    if args[:1] != ["run"] or {"-h", "--help", "-d", "--detach"} & set(args):
        cli_main()  # topo.api (the IR, the backends) only if the command needs it
        return
    from topo.cli.early import RUN_BACKEND, EarlyBackend, named_backend
    from topo.rundir.record import named_run_dir, recorded_backend

    run_dir = named_run_dir(args[1:])  # --from RUN_DIR: the backend it recorded
    recorded = None if run_dir is None else recorded_backend(run_dir)
    if named_backend(args[1:], recorded[0] if recorded else RUN_BACKEND) != "procs":
        cli_main()
        return
    from topo.backends.procs import ProcsBackend

    early = EarlyBackend(ProcsBackend())
    try:
        cli_main(early)
    finally:
        early.close()  # not taken by topo run
