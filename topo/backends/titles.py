"""Process titles: what ``ps`` and ``top`` show for topo's processes.

A node's process reads ``topo: <program>/<node>`` (``topo: acme/actor/3``), one of several
colocated nodes names them compactly (``topo: acme/actor/0-3+learner``); the fork server
``topo: <program> fork server``, an ssh host's agent ``topo: agent <host>``, the launcher
``topo: run <program> (<backend>)``. Without ``setproctitle`` nothing changes.

Inside a Slurm job (``SLURM_JOB_ID`` set) a process's short name (``/proc/PID/comm``,
what ``ps -o comm`` and ``top`` show) is its title in one word (``topo:agent-n1``):
Slurm's ``proctrack/linuxproc`` reads ``/proc/PID/stat`` word by word, and a process
whose short name has a space is not counted in its step -- neither it nor what it
forks would get the job's signals or its final kill.

A Ray worker keeps the title Ray gives it (``ray::ExecutableActor.run``): Ray sets it
again at every call of the actor, and ``ray stop`` finds its workers by it; the actor's
name is the executable's id (``ray list actors``, the dashboard).
"""

from __future__ import annotations

import os
from collections.abc import Sequence

MAX_TITLE = 160  # longer titles are cut (ps and top cut them anyway)
MAX_SHORT = 15  # the kernel keeps this many bytes of a short name


def set_title(title: str) -> None:
    """Set this process's title (``/proc/PID/cmdline`` and its short name)."""
    try:
        from setproctitle import setproctitle
    except ImportError:  # a host without it: the title stays the command line
        return
    if len(title) > MAX_TITLE:
        title = title[: MAX_TITLE - 1] + "…"
    try:
        setproctitle(title)
    except Exception:  # never worth failing a node for
        pass
    if "SLURM_JOB_ID" in os.environ:
        set_short_name(one_word(title))


def one_word(title: str) -> str:
    """``title`` as one word: ``topo: agent n1`` -> ``topo:agent-n1``."""
    return "-".join(title.replace(": ", ":", 1).split())


def set_short_name(name: str) -> None:
    """Set this process's short name (``/proc/PID/comm``; cut to ``MAX_SHORT`` bytes)."""
    try:
        with open("/proc/self/comm", "wb") as comm:
            comm.write(name.encode()[:MAX_SHORT].decode(errors="ignore").encode())
    except OSError:  # not Linux: no such name to keep
        pass


def _ranges(replicas: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``0-2,5``."""
    out: list[str] = []
    start = prev = replicas[0]
    for r in [*replicas[1:], None]:
        if r is not None and r == prev + 1:
            prev = r
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        if r is not None:
            start = prev = r
    return ",".join(out)


def nodes_name(nodes: Sequence[str]) -> str:
    """Node ids in short: replicas of a group as ranges (``actor/0-3``), groups joined
    with ``+``, in the order first seen."""
    groups: dict[str, list[int]] = {}
    singles: dict[str, None] = {}
    order: dict[str, None] = {}
    for node in nodes:
        group, _, replica = node.rpartition("/")
        if group and replica.isdigit():
            groups.setdefault(group, []).append(int(replica))
            order.setdefault(group, None)
        else:
            singles.setdefault(node, None)
            order.setdefault(node, None)
    parts = []
    for name in order:
        if name in groups:
            parts.append(f"{name}/{_ranges(sorted(set(groups[name])))}")
        else:
            parts.append(name)
    return "+".join(parts)


def node_title(program: str, nodes: Sequence[str]) -> str:
    """The title of a process running ``nodes`` of ``program``."""
    return f"topo: {program}/{nodes_name(nodes)}"
