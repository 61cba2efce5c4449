"""Every thread's Python stack in this process, as text: what ``topo stacks`` shows of a
node. The launcher asks the node's state door, which is served beside busy handlers, so
a node whose handler threads are all stuck still answers; nothing is stopped."""

from __future__ import annotations

import os
import sys
import threading
import traceback


def thread_stacks() -> str:
    """The stacks of this process's threads, the main thread first, then by name (the
    thread answering is left out: its stack is this function)."""
    me = threading.get_ident()
    main = threading.main_thread().ident
    threads = {t.ident: t for t in threading.enumerate()}
    frames = sys._current_frames()

    def order(ident: int) -> tuple[bool, str]:
        found = threads.get(ident)
        return ident != main, found.name if found is not None else ""

    parts = []
    for ident in sorted(frames, key=order):
        if ident == me:
            continue
        found = threads.get(ident)
        name = found.name if found is not None else f"thread {ident}"
        daemon = " (daemon)" if found is not None and found.daemon else ""
        stack = "".join(traceback.format_stack(frames[ident])).rstrip()
        parts.append(f'thread "{name}"{daemon}, most recent call last:\n{stack}')
    return f"process {os.getpid()}, {len(parts)} thread(s)\n\n" + "\n\n".join(parts)
