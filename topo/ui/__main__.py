"""``python -m topo.ui RUN_DIR HOST PORT``: the dashboard process ``topo run --ui``
starts (``topo.ui.spawn``); its token comes on stdin and it ends when stdin closes."""

from __future__ import annotations

import signal
import sys
from pathlib import Path


def main(argv: list[str]) -> int:
    """Serve the dashboard of ``argv``'s run directory for the process that started it."""
    if len(argv) != 3:
        print("error: usage: python -m topo.ui RUN_DIR HOST PORT", flush=True)
        return 2
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's: it ends us later
    try:
        from setproctitle import setproctitle

        setproctitle(f"topo: ui {Path(argv[0]).name}")
    except ImportError:
        pass
    from topo.ui.serve import child

    return child(Path(argv[0]), argv[1], int(argv[2]))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
