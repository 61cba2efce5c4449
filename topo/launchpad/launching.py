"""``lp.launch``: a Launchpad program compiled to topo's IR and started on a backend.

``local_mt``/``test_mt`` run on the ``threads`` backend, ``local_mp``/``test_mp`` on
``procs`` (or any backend by name with ``backend=``). The launched program is
returned; ``test_*`` launches stop it in the test case's cleanup, ``local_*`` launches
wait for it when the script ends, as Launchpad does.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from topo.api import prepare, start
from topo.ir import Program as IrProgram
from topo.ir import RpcSettings
from topo.launchpad import live, node_process
from topo.launchpad.address import bind_local_addresses
from topo.launchpad.flags import read_flags
from topo.launchpad.launch_type import LaunchType
from topo.launchpad.launched import Launched, prune, remember
from topo.launchpad.local import Printer, prefix_width, say, wait_at_exit
from topo.launchpad.nodes.base import Node
from topo.launchpad.program import Program
from topo.launchpad.translate import Compiled, ProgramError, compile_program

log = logging.getLogger("topo.launchpad")
CALL_DEADLINE_S = 3600.0  # of calls to nodes without call_timeout (Launchpad: none)


def _launch_type(value: LaunchType | str | None) -> LaunchType:
    if value is None:
        from topo.launchpad.flags import launch_type_flag

        value = launch_type_flag()
    if isinstance(value, LaunchType):
        return value
    try:
        return LaunchType(value)
    except ValueError:
        known = ", ".join(t.value for t in LaunchType)
        raise ValueError(
            f"launch type {value!r} does not run on topo (launch types: {known}; other "
            "backends by name with backend='ssh' or 'ray')"
        ) from None


def launch(
    programs: Program | Sequence[Program],
    launch_type: LaunchType | str | None = None,
    xm_resources: Any = None,
    local_resources: Mapping[str, Any] | None = None,
    test_case: Any = None,
    terminal: str | None = None,
    *,
    serialize_py_nodes: bool | None = None,
    controller_xm_requirements: Any = None,
    backend: str | None = None,
    backend_options: Mapping[str, Any] | None = None,
    seed: int = 0,
    log_dir: str = "runs",
) -> Launched:
    """Launch ``programs`` (only the first of a list, as Launchpad does) and return at
    once. ``local_resources`` maps a label to a ``PythonProcess`` whose ``env`` its
    nodes get (ignored with a warning on threads, as Launchpad does). Nodes are built
    from pickled copies of their arguments, except on threads with
    ``serialize_py_nodes=False``: there they get the very objects given (an Event the
    test waits on), as in Launchpad. ``terminal`` and ``xm_resources`` are ignored."""
    kind = _launch_type(launch_type)
    read_flags()  # as Launchpad's launch: absl flags readable in the launcher and its threads
    if not isinstance(programs, Program) and not programs:
        raise ValueError("lp.launch needs a program")
    program = programs if isinstance(programs, Program) else programs[0]
    if serialize_py_nodes:  # Launchpad's check, and its RuntimeError, before anything runs
        from topo.launchpad.serialization import check_program_serializable

        check_program_serializable(program)
    if backend is None:  # --topo_backend / --topo_hosts on the script's command line
        from topo.launchpad.flags import backend_flags

        flagged, options = backend_flags()
        backend, backend_options = flagged, backend_options or options or None
    backend = backend or kind.backend
    if backend in ("threads", "procs"):  # Launchpad binds its nodes' addresses locally
        bind_local_addresses(n for node in program.get_all_nodes() for n in _inner(node))
    kept: list[str] = []
    keep = None
    if backend == "threads":
        _check_thread_resources(program, local_resources, kind)
        local_resources = None
        if serialize_py_nodes is False:

            def keep(obj: Any) -> str:
                kept.append(live.keep(obj))
                return kept[-1]

    else:
        local_resources = _node_processes(program, local_resources, kind)
    made: list[Compiled] = []

    def build() -> IrProgram:  # called by prepare while the backend warms up
        compiled = _compile(program, local_resources, seed, keep, kind, backend)
        made.append(replace(compiled, program=patient_calls(compiled.program)))
        return made[0].program

    try:
        launcher = prepare(build, backend, backend_options=backend_options, log_dir=log_dir)
        listeners = () if kind.is_test else [Printer(launcher.program)]
        run = start(launcher, listeners)
    except BaseException:
        live.release(kept)
        raise
    compiled = made[0]
    launched = Launched(compiled, run)
    launched.live_objects = kept
    remember(launched)
    if test_case is not None:
        test_case.addCleanup(_cleanup, launched)
        return launched
    width = prefix_width(launched.program) if not kind.is_test else 4
    say(f"{'topo':<{width}} | {kind.value} on {backend}: logs in {run.run_dir}", sys.stderr)
    if not kind.is_test:
        wait_at_exit(launched)
    return launched


def _inner(node: Any) -> list[Any]:
    """The nodes a program entry stands for (a colocation's nodes); a non-node: none."""
    return node.inner_nodes() if isinstance(node, Node) else []


def patient_calls(ir: IrProgram) -> IrProgram:
    """Calls without a ``call_timeout`` wait as long as Launchpad's courier calls do, in
    practice: a learner's first ``step()`` may wait minutes for replay to fill and its
    functions to compile. They still end, after an hour, where Launchpad's never do."""
    groups = tuple(
        replace(g, rpc=replace(g.rpc, deadline_s=CALL_DEADLINE_S))
        if g.rpc.deadline_s == RpcSettings().deadline_s
        else g
        for g in ir.groups
    )
    return replace(ir, groups=groups)


def _compile(
    program: Program,
    resources: Mapping[str, Any] | None,
    seed: int,
    keep: Any,
    kind: LaunchType,
    backend: str,
) -> Compiled:
    try:
        return compile_program(program, resources=resources, seed=seed, live=keep)
    except ProgramError as exc:
        if backend == "threads" and "cloudpickle failed" in str(exc):
            raise ProgramError(
                f"{exc}\n(on {kind.value}, lp.launch(..., serialize_py_nodes=False) gives "
                "thread nodes the objects as they are, unpickled)"
            ) from None
        raise


def _node_processes(
    program: Program, resources: Mapping[str, Any] | None, kind: LaunchType
) -> dict[str, Any]:
    """Every label's process settings: the ``PythonProcess`` given (or none: Mava gives
    ``[]``) with what makes its processes set up absl as Launchpad's do (its ``args``
    parsed as flags there; see :mod:`topo.launchpad.node_process`)."""
    from topo.backends.child import SETUP_ENV
    from topo.launchpad.nodes.python.local_multi_processing import PythonProcess

    given = dict(resources or {})
    out: dict[str, Any] = dict(given)  # a label that is no group stays, to be refused
    for label, nodes in program.groups.items():
        if not nodes:
            continue
        process = given.get(label)
        env = {str(k): str(v) for k, v in (getattr(process, "env", None) or {}).items()}
        args = node_process.command_line(getattr(process, "args", None))
        env.update(node_process.node_env(kind.value, args))
        hooks = [h for h in env.get(SETUP_ENV, "").split(",") if h]
        env[SETUP_ENV] = ",".join([node_process.SETUP_TARGET, *hooks])
        out[label] = PythonProcess(env=env)
    return out


def _check_thread_resources(
    program: Program, resources: Mapping[str, Any] | None, kind: LaunchType
) -> None:
    """Launchpad's multi-threading launches ignore ``local_resources`` (threads share the
    launcher's environment), so the same program still runs on local_mt/test_mt; a label
    that is no group is still an error."""
    if resources:
        unknown = [label for label in resources if label not in program.groups]
        if unknown:
            raise ProgramError(
                f"local_resources names {unknown[0]!r}, which is not a group of the program "
                f"(groups: {', '.join(program.groups)})"
            )
        log.warning("local_resources are ignored on %s: nodes run as threads", kind.value)


def _cleanup(launched: Launched) -> None:
    """A test case's cleanup: stop the program, then fail the test with the node
    failure that ended it, if one did (as Launchpad's cleanup does)."""
    launched.stop(timeout=60)
    prune()
    launched.raise_failure()
