"""A node module that ends the procs fork server importing it (``os._exit(3)``): a fork
server that dies before it is ready. Imported in the launcher too, where it does nothing."""

from __future__ import annotations

import os
import sys

if sys.argv and sys.argv[0].endswith(os.path.join("backends", "forkserver.py")):
    os._exit(3)


class Nothing:
    """Never started: its fork server is gone first."""
