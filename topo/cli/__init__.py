"""The ``topo`` command line: one module per command, registered on one typer app and
imported only when its command is used (the table is ``topo.cli.lazy.COMMANDS``).

Exit codes: 0 success; 1 a bad file or a failed run; 2 a command-line mistake (an unknown
option or command, a bad option value, a missing argument: click's convention); 130 and
143 a run stopped by Ctrl-C (SIGINT) and SIGTERM.

Importing this package imports nothing else: ``topo.command`` reads ``topo run``'s
backend (``topo.cli.early``) and starts its fork server before typer is imported. The
typer app is ``topo.cli.app.app``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from topo.cli.early import EarlyBackend


def main(early: EarlyBackend | None = None) -> None:
    """Console-script entry point (``topo.command`` calls it, handing over the backend it
    warmed up for ``topo run``, if any)."""
    from topo.cli.app import app

    app(prog_name="topo", obj=early)


__all__ = ["main"]
