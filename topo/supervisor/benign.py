"""Known-benign lines that libraries print at every run, kept off the console.

Reverb logs INFO lines at every start and clean stop (its checkpointer initialising in a
scratch directory, a sampler that reaches its table directly, the server starting and
shutting down) in a format that does not say they are INFO; on a console they read like
trouble. They stay in the node's log file in the run directory (the node writes that
itself); only the launcher's live output leaves them out. Warnings and errors are never
listed here.
"""

from __future__ import annotations

import re

BENIGN = re.compile(
    r"^\[reverb/cc/("
    r"client\.cc:\d+\] Sampler and server are owned by the same process"
    r"|platform/tfrecord_checkpointer\.cc:\d+\] +(Initializing TFRecordCheckpointer"
    r"|Loading latest checkpoint)"
    r"|platform/default/server\.cc:\d+\] (Started replay server|Shutting down replay server)"
    r")"
)


def is_benign(line: str) -> bool:
    """True for a line known to be harmless noise (see the module docstring)."""
    return BENIGN.match(line.lstrip()) is not None
