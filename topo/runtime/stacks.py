"""Every thread's Python stack in this process, as text: what ``topo stacks`` shows of a
node. The launcher asks the node's state door, which is served beside busy handlers, so
a node whose handler threads are all stuck still answers; nothing is stopped.

By default the stacks are the program's: frames of topo's machinery and Python's own
above the first frame of the program's code (the node's class, its libraries, topo's
node kinds and test nodes) are counted, not shown, and threads with no frame of the program's code
(topo's housekeeping, idle handler threads) are named on one line. ``everything`` shows
every frame of every thread."""

from __future__ import annotations

import os
import sys
import sysconfig
import threading
import traceback
from pathlib import Path

_TOPO = Path(__file__).resolve().parent.parent
# topo's own node kinds and the test nodes of topo.testing are the program's code
_PROGRAMS = (_TOPO / "nodes", _TOPO / "testing")
_PYTHON = {
    str(Path(p).resolve())
    for p in (sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
}


def _machinery(filename: str) -> bool:
    """Whether a frame in ``filename`` is topo's machinery or Python's own (its standard
    library, its frozen modules, ``multiprocess``'s process start), not the program's."""
    if filename.startswith("<"):
        return True
    path = Path(filename)
    if path.is_relative_to(_TOPO):
        return not any(path.is_relative_to(p) for p in _PROGRAMS)
    if "multiprocess" in path.parts and "site-packages" in path.parts:
        return True
    return any(filename.startswith(p + os.sep) for p in _PYTHON)


def thread_stacks(everything: bool = False) -> str:
    """The stacks of this process's threads, the main thread first, then by name (the
    thread answering is left out: its stack is this function); see the module."""
    me = threading.get_ident()
    main = threading.main_thread().ident
    threads = {t.ident: t for t in threading.enumerate()}
    frames = sys._current_frames()

    def order(ident: int) -> tuple[bool, str]:
        found = threads.get(ident)
        return ident != main, found.name if found is not None else ""

    parts, quiet = [], []
    for ident in sorted(frames, key=order):
        if ident == me:
            continue
        found = threads.get(ident)
        name = found.name if found is not None else f"thread {ident}"
        stack = traceback.extract_stack(frames[ident])
        hidden = 0
        if not everything:
            hidden = next((i for i, f in enumerate(stack) if not _machinery(f.filename)), -1)
            if hidden < 0:
                quiet.append(name)
                continue
            stack = traceback.StackSummary.from_list(stack[hidden:])
        daemon = " (daemon)" if found is not None and found.daemon else ""
        above = f"  ({hidden} frames of topo and Python above)\n" if hidden else ""
        text = above + "".join(stack.format()).rstrip()
        parts.append(f'thread "{name}"{daemon}, most recent call last:\n{text}')
    total = len(parts) + len(quiet)
    if quiet:
        parts.append(
            f"{len(quiet)} thread(s) in topo's or Python's code only: {', '.join(quiet)} "
            "(topo stacks --all shows them)"
        )
    return f"process {os.getpid()}, {total} thread(s)\n\n" + "\n\n".join(parts)
