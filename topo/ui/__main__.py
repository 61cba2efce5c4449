"""``python -m topo.ui - HOST PORT``: the dashboard process ``topo run --ui`` starts
(``topo.ui.spawn``) before its run does; its token and then the run directory come on
stdin, and it ends when stdin closes."""

from __future__ import annotations

import signal
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    """Serve the dashboard of ``argv``'s run directory for the process that started it."""
    if len(argv) != 3:
        print("error: usage: python -m topo.ui RUN_DIR|- HOST PORT", flush=True)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's: it ends us later
    try:  # imported first: the run directory comes once the run has started
        from topo.ui.serve import child, set_title
    except Exception as exc:
        print(f"error: the dashboard cannot start: {exc!r}", flush=True)
        return 1
    if argv[0] != "-":
        set_title(Path(argv[0]))
    return child(None if argv[0] == "-" else Path(argv[0]), argv[1], int(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
