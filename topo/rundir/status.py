"""``status.json``: the run and its nodes as the launcher last saw them.

The launcher rewrites it while the run goes on (``topo.supervisor.record`` says when),
with its own pid and start time in it, so that a reader tells a live run from a lost
one (``topo.runs.probe``); ``topo rm`` of a lost run rewrites it once more. Every
write replaces the file at once: a reader never sees half of it.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from topo.rundir.layout import STATUS_FILE


def status_path(run_dir: Path) -> Path:
    """``<run_dir>/status.json``."""
    return run_dir / STATUS_FILE


def read_status(run_dir: Path) -> dict[str, Any] | None:
    """``status.json`` of ``run_dir`` (None when there is none or it cannot be read)."""
    try:
        data = json.loads(status_path(run_dir).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_status(run_dir: Path, status: dict[str, Any]) -> None:
    """Replace ``status.json`` at once (each writing thread with a scratch file of its
    own)."""
    path = status_path(run_dir)
    tmp = path.with_name(f".{STATUS_FILE}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(status, indent=2, default=str) + "\n")
    os.replace(tmp, path)
