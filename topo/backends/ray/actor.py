"""The Ray actor that is one attempt of one executable asking for GPUs: Ray assigns
devices to its own workers only, so such an executable runs in a Ray worker of its own
(every other one is forked by its node's agent, ``agent``). This module is imported in
Ray worker processes; it needs nothing from Ray itself but the node's address.

``run`` sets the worker process up with the shared child set-up (``child.run_child``,
without taking over the process group or signals, which stay Ray's) and runs the
executable until it ends; its exit code is the result. Output goes to files in a
directory local to the Ray node; the launcher pulls their new complete lines with
``read_logs`` (the same way on one machine and across nodes). The actor is threaded
(``max_concurrency`` > 1), so ``read_logs``, ``where`` and ``dump_stacks`` answer while
``run`` is busy.
"""

from __future__ import annotations

import faulthandler
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from topo.backends.remote.follow import LogFollower


def local_log_root(program_id: str) -> Path:
    """The node-local directory where a run's actors and agents write their output."""
    return Path(tempfile.gettempdir()) / "topo-ray" / program_id


def prepare_paths(init: dict[str, Any]) -> list[str]:
    """Make this Ray worker import what the launcher imports (``init``: the run's, the
    same for every actor); the import path list, first first. Shipped: Ray unpacked the
    launcher's tree here and made it the working directory; else the launcher's roots
    and directory are this node's too (a shared filesystem)."""
    if init["shipped"]:
        sys.path.extend(p for p in init["sys_path"][1:] if p not in sys.path)
        return [os.getcwd(), *init["sys_path"][1:]]
    for path in reversed(init["sys_path"]):  # the launcher's roots, in its order
        if path not in sys.path:
            sys.path.insert(0, path)
    if os.path.isdir(init["cwd"]):  # relative paths mean what they do for procs
        os.chdir(init["cwd"])
    return list(init["sys_path"])


class ExecutableActor:
    """One attempt of one executable, as a Ray actor (see the module's docstring)."""

    def __init__(self) -> None:
        self._tail: LogFollower | None = None
        self._dir: Path | None = None

    def where(self) -> tuple[int, str]:
        """This process's pid and the Ray node's address."""
        import ray

        return os.getpid(), str(ray.util.get_node_ip_address())

    def run(self, init: dict[str, Any], exe: str, attempt: int, grant: str = "") -> int:
        """Run ``attempt`` of executable ``exe`` of the program ``init`` describes (the
        same for every actor of a run) in this process, with its rights (``grant``); its
        exit code."""
        import ray

        from topo.backends.child import ChildOutput, ChildSpec, run_child
        from topo.backends.imports import prepare_imports
        from topo.backends.worker import target_modules
        from topo.ir import loads
        from topo.rundir.layout import safe_name
        from topo.runtime import Grant, RegistryInfo

        prepare_paths(init)
        program = loads(init["program_json"])
        registry = dict(init["registry"])
        registry["bind_host"] = str(ray.util.get_node_ip_address())  # nodes bind this node
        info = RegistryInfo(**registry)
        self._dir = local_log_root(info.program_id) / f"{safe_name(exe)}-{attempt}"
        output = ChildOutput.in_run_dir(self._dir, program, exe)
        files = dict(output.node_files)
        nodes = program.executable_index[exe].nodes
        files[exe if len(nodes) > 1 else nodes[0]] = output.exe_file
        self._tail = LogFollower()
        for label, path in files.items():
            self._tail.follow(label, path, from_end=False)
        prepare_imports(program, target_modules(program))
        spec = ChildSpec(
            program,
            exe,
            attempt,
            info,
            output,
            bool(init["disable_run"]),
            devices_assigned=True,
            grant=Grant.from_json(grant) if grant else None,
        )
        code = run_child(spec, lambda: True, own_process=False)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        return code

    def read_logs(self, final: bool = False) -> dict[str, str]:
        """Label (node or executable id) -> new complete lines; ``final``: everything left,
        and the local files are removed."""
        if self._tail is None:
            return {}
        out = self._tail.read(final)
        if final and self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
        return out

    def dump_stacks(self) -> None:
        """Every thread's stack into the executable's log (a node stuck starting)."""
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
