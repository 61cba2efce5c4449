"""The ``topo`` command line: one module per command, registered on one typer app and
imported only when its command is used (the table is ``topo.cli.lazy.COMMANDS``).

Exit codes: 0 success; 1 a bad file or a failed run; 2 a command-line mistake (an unknown
option or command, a bad option value, a missing argument: click's convention); 130 and
143 a run stopped by Ctrl-C (SIGINT) and SIGTERM.
"""

from __future__ import annotations

from topo.cli.app import app


def main() -> None:
    """Console-script entry point (``topo.command`` calls it)."""
    app(prog_name="topo")


__all__ = ["app", "main"]
