"""Setting up one executable's process: the part every process backend shares.

A backend that runs an executable as its own process (procs: forked from the
fork server; later ssh: forked by a per-host agent; ray: inside an actor) makes
the process, then calls ``child_main``. It owns the process from there on: own
process group, default signals, stdout/stderr to the executable's log file,
per-node output routing, the group resources (env, cwd, CPU affinity,
``CUDA_VISIBLE_DEVICES``, memory limit), a watchdog on the parent, the connection to
the program's registry, the nodes themselves, their status (``report`` over the
registry) and the exit.

Nothing here assumes a fork server: the caller says where output goes
(``ChildOutput``) and how to tell that its parent is gone (``parent_alive``).

A group's memory limit (``resources.memory``) is a watchdog thread on the process's
resident size (RSS, read every ``MEMORY_POLL_S``): past it, the process tells the
launcher why (the failure text starts with ``ENDED_BY_TOPO``) and SIGKILLs its process
group. Not ``RLIMIT_AS``: that bounds address space, which numpy, zmq and thread arenas
reserve far beyond what they use (and it fails allocations instead of naming the
cause); not cgroups: they need a writable cgroup v2 tree, which hosts rarely delegate.
The processes the nodes start are not counted (forked children share their parent's
pages); a leak faster than the poll overshoots by what it allocates in that time.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from topo.backends.logs import Stamped, route_node_output
from topo.backends.rotation import LogLimit, RotatingFds
from topo.backends.titles import node_title, set_title
from topo.backends.worker import Report, run_executable
from topo.ir import Program
from topo.rundir.layout import exe_output_path, log_path
from topo.runtime import (
    Grant,
    ProgramContext,
    RegistryInfo,
    connect_program,
    device_memory,
    set_process_program,
)
from topo.runtime.registry_client import RegistryClient
from topo.runtime.sigterm import hold_sigterm
from topo.targets import load_target

ORPHANED_EXIT = 70  # the parent (launcher, or the process that made us) is gone
MEMORY_POLL_S = 0.1  # how often a process with a memory limit reads its resident size
SETUP_ENV = "TOPO_PROCESS_SETUP"  # module:function,... each node process calls first


@dataclass(frozen=True)
class ChildOutput:
    """Where an executable's output goes: ``exe_file`` takes fds 1 and 2 (C libraries
    included); ``node_files`` routes each node's Python-level writes when it has several;
    every file is rotated past ``limit`` (None: no cap)."""

    exe_file: Path
    node_files: Mapping[str, Path] = field(default_factory=dict)
    limit: LogLimit | None = None

    @classmethod
    def in_run_dir(
        cls, run_dir: Path, program: Program, exe_id: str, limit: LogLimit | None = None
    ) -> ChildOutput:
        """The run directory's layout (``topo.rundir.layout``)."""
        exe = program.executable_index[exe_id]
        files = {n: log_path(run_dir, n) for n in exe.nodes} if len(exe.nodes) > 1 else {}
        return cls(exe_output_path(run_dir, exe), files, limit)


@dataclass(frozen=True)
class ChildSpec:
    """Which attempt of which executable of which program this process is, where it
    reports (the program's registry, public part) and its rights (``grant``)."""

    program: Program
    exe_id: str
    attempt: int
    registry: RegistryInfo
    output: ChildOutput
    disable_run: bool = False
    # The host scheduler gave this process its CPUs and GPUs (Ray sets CUDA_VISIBLE_DEVICES
    # for an actor's GPUs): resources.cpus/gpus were counts, not core or device ids.
    devices_assigned: bool = False
    grant: Grant | None = None
    # the accelerators placement gave it on this host (``gpu:0,1``; None: none placed)
    accelerators: str | None = None


def registry_reporter(context: ProgramContext, exe_id: str, attempt: int, pid: int) -> Report:
    """A ``worker.Report`` that sends node status to the launcher over the registry."""
    book = context.address_book
    assert isinstance(book, RegistryClient), "node status goes through the registry"

    def report(kind: str, node: str, text: str) -> None:
        try:
            book.report(kind, node, exe_id, attempt, pid, text)
        except Exception as exc:  # the launcher is gone or unreachable: say so in the log
            print(
                f"topo: could not report {node} {kind} to the launcher: {exc!r}",
                file=sys.stderr,
                flush=True,
            )

    return report


def redirect_output(output: ChildOutput, program_id: str) -> None:
    """Send fds 0/1/2 and ``sys.stdout``/``sys.stderr`` where ``output`` says (with a
    cap: rotated by this process, see ``topo.backends.rotation``)."""
    output.exe_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(output.exe_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.close(null)
    written = None
    if output.limit is not None:
        rotating = RotatingFds(output.exe_file, output.limit)
        rotating.watch()
        written = rotating.written
    sys.stdout = Stamped(open(1, "w", buffering=1, closefd=False, errors="replace"), written)
    sys.stderr = Stamped(open(2, "w", buffering=1, closefd=False, errors="replace"), written)
    if output.node_files:
        route_node_output(program_id, dict(output.node_files), output.limit)


def apply_resources(
    program: Program,
    node_ids: tuple[str, ...],
    *,
    devices: bool = True,
    assigned: str | None = None,
) -> None:
    """The groups' ``resources``: which accelerators the process may open
    (``topo.backends.devices``), env vars (the group's own win), CPU affinity, working
    dir. ``devices`` False: the host scheduler gave the process its CPUs and devices
    (Ray): they are left as it set them, the platform still said. ``assigned``: the
    accelerators placement gave the process (``topo.backends.device_plan``)."""
    from topo.backends import devices as platform
    from topo.backends.device_plan import parse_assigned

    groups = {program.group_of(n).name: program.group_of(n) for n in node_ids}
    resources = [g.resources for g in groups.values()]
    env = platform.platform_env(resources, parse_assigned(assigned))
    if not devices and platform.asked(resources) is not None:
        env = {k: v for k, v in env.items() if k in ("JAX_PLATFORMS", "PJRT_DEVICE")}
    for res in resources:
        env.update({k: str(v) for k, v in res.env.items()})
    platform.apply(env)
    for res in resources:
        if devices and res.cpus:
            os.sched_setaffinity(0, set(res.cpus))
        if res.workdir:
            os.makedirs(res.workdir, exist_ok=True)
            os.chdir(res.workdir)


def run_setup_hooks() -> None:
    """Call each ``module:function`` named in ``TOPO_PROCESS_SETUP`` (comma-separated), in
    order, once the environment is set and before any node is built: how a front end
    (``topo.launchpad``: absl flags and logging) prepares its node processes."""
    for target in os.environ.get(SETUP_ENV, "").split(","):
        if target.strip():
            load_target(target.strip())()


def watch_parent(parent_alive: Callable[[], bool], interval: float = 0.25) -> None:
    """A daemon thread that ends this process at once when ``parent_alive()`` is False."""

    def loop() -> None:
        while True:
            time.sleep(interval)
            if not parent_alive():
                os._exit(ORPHANED_EXIT)

    threading.Thread(target=loop, name="topo-parent-watch", daemon=True).start()


def memory_limit(program: Program, node_ids: tuple[str, ...]) -> int | None:
    """The memory limit of a process running ``node_ids``: the smallest of their groups'
    ``resources.memory`` (bytes), None when none has one."""
    limits = [program.group_of(n).resources.memory for n in node_ids]
    found = [m for m in limits if m is not None]
    return min(found) if found else None


def resident_bytes() -> int:
    """This process's resident memory (RSS), bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def watch_memory(limit: int, over: Callable[[int], None], interval: float = MEMORY_POLL_S) -> None:
    """A daemon thread that calls ``over(rss)`` once this process's resident size passes
    ``limit`` bytes (then stops watching)."""

    def loop() -> None:
        while True:
            time.sleep(interval)
            rss = resident_bytes()
            if rss > limit:
                over(rss)
                return

    threading.Thread(target=loop, name="topo-memory-watch", daemon=True).start()


def _end_over_limit(spec: ChildSpec, context: ProgramContext, limit: int, rss: int) -> None:
    """Say why in the log and to the launcher (as the first node's failure), then SIGKILL
    this process's group: the executable and the processes its nodes started."""
    from topo.backends.base import ENDED_BY_TOPO
    from topo.vocab import format_size

    nodes = spec.program.executable_index[spec.exe_id].nodes
    text = (
        f"{ENDED_BY_TOPO}exceeded its memory limit {format_size(limit)} "
        f"(resident {rss / 2**20:.0f} MiB)"
        + (f"; its process also ran {', '.join(nodes[1:])}" if len(nodes) > 1 else "")
    )
    print(f"topo: {nodes[0]} {text[len(ENDED_BY_TOPO) :]}: killed", file=sys.stderr, flush=True)
    report = registry_reporter(context, spec.exe_id, spec.attempt, os.getpid())
    sender = threading.Thread(target=report, args=("failed", nodes[0], text), daemon=True)
    sender.start()
    sender.join(3.0)  # the kill comes anyway if the launcher does not answer
    os.killpg(0, signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _report_setup_failure(spec: ChildSpec, context: ProgramContext | None, text: str) -> None:
    """A failure before the nodes ran (bad workdir, unreachable registry...): tell the
    launcher if the registry can be reached, and leave it in the log in any case."""
    first = spec.program.executable_index[spec.exe_id].nodes[0]
    try:  # the launcher appends the traceback to the node's log
        book = (context or connect_program(spec.registry, spec.grant)).address_book
        assert isinstance(book, RegistryClient)
        book.report("failed", first, spec.exe_id, spec.attempt, os.getpid(), text)
    except BaseException:
        print(text, file=sys.stderr, end="", flush=True)


def run_child(
    spec: ChildSpec, parent_alive: Callable[[], bool], *, own_process: bool = True
) -> int:
    """Set this process up as executable ``spec.exe_id`` and run it; its exit code.

    ``own_process`` False: the process belongs to a host that keeps its process group and
    signal handlers (a Ray worker, where this runs in one of the actor's threads)."""
    context: ProgramContext | None = None
    nodes = spec.program.executable_index[spec.exe_id].nodes
    if own_process:  # a Ray worker keeps Ray's title: Ray resets it per call, ray stop reads it
        set_title(node_title(spec.program.name, nodes))
    try:
        if own_process:
            os.setpgid(0, 0)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            if not hold_sigterm():  # (a Slurm step's SIGTERM is a notice: the launcher's)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
        redirect_output(spec.output, spec.registry.program_id)
        # `kill -USR1 <pid>` (and the launcher, for a node stuck starting) dumps every
        # thread's stack into the node's log.
        faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)
        apply_resources(
            spec.program, nodes, devices=not spec.devices_assigned, assigned=spec.accelerators
        )
        run_setup_hooks()
        watch_parent(parent_alive)
        context = connect_program(spec.registry, spec.grant)
        set_process_program(context)
        if spec.accelerators or _asks_for_devices(spec.program, nodes):
            book = context.address_book
            device_memory.watch(book, nodes[0], getattr(book, "stop_event", threading.Event()))
        limit = memory_limit(spec.program, nodes)
        if limit is not None and own_process:  # a Ray worker is not ours to kill
            ctx = context
            watch_memory(limit, lambda rss: _end_over_limit(spec, ctx, limit, rss))
        report = registry_reporter(context, spec.exe_id, spec.attempt, os.getpid())
        return run_executable(spec.program, spec.exe_id, context, report, spec.disable_run)
    except BaseException:
        _report_setup_failure(spec, context, traceback.format_exc())
        return 1


def child_main(spec: ChildSpec, parent_alive: Callable[[], bool]) -> NoReturn:
    """``run_child``, then flush and leave at once (no atexit, no inherited cleanup)."""
    from topo.runtime.pool import ends_after_close

    ends_after_close()
    code = 1
    try:
        code = run_child(spec, parent_alive)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _asks_for_devices(program: Program, node_ids: tuple[str, ...]) -> bool:
    """Whether the process runs a node of a group that asks for accelerators."""
    from topo.backends.devices import asked

    return asked(program.group_of(n).resources for n in node_ids) is not None
