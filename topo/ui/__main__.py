"""``python -m topo.ui - HOST PORT``: the dashboard process ``topo run --ui`` starts
(``topo.ui.spawn``) before its run does; its token and then the run directory come on
stdin, and it ends when stdin closes."""

from __future__ import annotations

import signal
import sys


def main(argv: list[str]) -> int:
    """Serve the dashboard of the run directory given on stdin for the process that
    started it."""
    if len(argv) != 3 or argv[0] != "-":
        print("error: usage: python -m topo.ui - HOST PORT", flush=True)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's: it ends us later
    try:  # imported first: the run directory comes once the run has started
        from topo.ui.serve import child
    except Exception as exc:
        print(f"error: the dashboard cannot start: {exc!r}", flush=True)
        return 1
    return child(argv[1], int(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
