"""Each executable's grant, from the IR: the keys of the nodes it runs and the tokens of
the nodes they are wired to (``topo.ir.rights``), made by the launcher's authority.

A backend hands an executable its grant (and the registry's public info) and nothing
else: no process but the launcher holds the program secret.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from topo.ir import Program
from topo.ir.rights import callees, executable_callees

if TYPE_CHECKING:
    from topo.backends.base import JobContext
    from topo.runtime import Authority, Grant

_lock = threading.Lock()
_tables: dict[int, tuple[Program, dict[str, tuple[str, ...]]]] = {}  # id(program) ->


def _callees(program: Program) -> dict[str, tuple[str, ...]]:
    """``callees(program)``, computed once per program (a run starts many executables)."""
    with _lock:
        found = _tables.get(id(program))
        if found is None or found[0] is not program:
            if len(_tables) > 8:
                _tables.clear()
            found = _tables[id(program)] = (program, callees(program))
        return found[1]


def _authority(job: JobContext) -> Authority:
    if job.authority is None:
        raise RuntimeError("this job has no authority to grant rights (made by the launcher)")
    return job.authority


def launcher_grant(job: JobContext) -> Grant:
    """The registry key of the launcher, for a backend whose executables run in the
    launcher's process (threads): they share one registry client."""
    from topo.runtime.rights import LAUNCHER

    return _authority(job).grant(LAUNCHER, (), ())


def exe_grant(job: JobContext, exe_id: str) -> Grant:
    """What executable ``exe_id`` of ``job`` gets to run its nodes and call their peers."""
    authority = _authority(job)
    program = job.program
    nodes = program.executable_index[exe_id].nodes
    calls = executable_callees(program, exe_id, _callees(program))
    return authority.grant(exe_id, nodes, calls)
