"""The pre-warmed fork server ("zygote") of the ``procs`` backend, and its children.

The launcher starts this module once per run as a fresh interpreter
(``python -m topo.backends.forkserver STATUS_FD``), as early as it can: while the
launcher still compiles the program, the server imports topo's runtime, numpy and
the registry of node kinds. Then it takes the program (``init``) and imports every
node target's module -- imports only: no zmq context, no threads -- then forks one
child per executable with ``multiprocess`` (fork context) from its main thread, so
children start in milliseconds with everything imported. It watches each child by its
pid (a pidfd, or ``waitpid`` polling where there is none), not by the ``multiprocess``
sentinel pipe, which a node's own forked children inherit and keep open.

Channels: the launcher writes length-prefixed pickles to the server's stdin
(``check`` before the run, ``init``, ``spawn``, ``program`` when ``topo apply`` changed
the program -- with init keys that change with it, if any -- ``shutdown``); the server
sends JSON datagrams to the launcher on an inherited ``AF_UNIX``/``SOCK_DGRAM`` socket:
what it found importing the targets (``checked``: ``topo run`` checks the nodes'
arguments with it before anything starts, without importing the targets itself), and
about the processes it owns (``server``, ``started``, ``exited``). Children set
themselves up with ``topo.backends.child`` and report node status over the registry's
RPC.

A ``spawn`` carries the executable's grant (its rights) as raw bytes after the pickle,
read into a buffer that is zeroed once the child is forked (``grant_pipe``).

Nothing is left behind: stdin EOF (the launcher died, even by ``kill -9``)
makes the server kill its children and exit; each child has
``PR_SET_PDEATHSIG=SIGKILL`` on the server and a watchdog thread polling the
launcher's pid. The processes a node starts end with its executable: each
executable leads its own process group, and the server is a child subreaper
(``PR_SET_CHILD_SUBREAPER``), so when an executable exits -- cleanly or not --
the server kills what is left of its group and every process re-parented to it
that is not a live executable or in a live executable's group (a process a
node detached with ``setsid`` cannot be traced back to its node: it ends when
any executable exits, or with the run).
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import shutil
import signal
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from topo.backends.grant_pipe import read_blob, wipe
from topo.backends.proctree import (
    become_subreaper,
    keep_niceness,
    kill_group,
    kill_tree,
    sweep_orphans,
)
from topo.rundir.pids import still_running

PR_SET_PDEATHSIG = 1
SWEEP_INTERVAL_S = 2.0  # how often the server reaps re-parented processes that ended
_status: socket.socket | None = None


# Whether the launcher still runs (``still_running``, made when the server took the run,
# so a forked executable inherits the launcher's start time).
_launcher_runs: Callable[[], bool] | None = None


def send_status(**msg: Any) -> None:
    """One JSON datagram to the launcher (dropped if the launcher is gone)."""
    if _status is None:
        return
    try:
        _status.send(json.dumps(msg).encode())
    except OSError:
        pass


def write_msg(fd: int, obj: Any) -> None:
    """Write one length-prefixed pickle to ``fd``."""
    data = pickle.dumps(obj)
    os.write(fd, struct.pack("!I", len(data)) + data)


def _read_exact(fd: int, n: int) -> bytes | None:
    buf = b""
    while len(buf) < n:
        chunk = os.read(fd, n - len(buf))
        if not chunk:
            return None
        buf += chunk
    return buf


def read_msg(fd: int) -> Any:
    """Read one length-prefixed pickle from ``fd``; None at EOF."""
    head = _read_exact(fd, 4)
    if head is None:
        return None
    body = _read_exact(fd, struct.unpack("!I", head)[0])
    return None if body is None else pickle.loads(body)


# -- inside a child ---------------------------------------------------------------


def child_main(
    init: dict[str, Any], exe_id: str, attempt: int, server_pid: int, grant: bytearray
) -> None:
    """Entry of a forked child: tie it to the server, then the shared child set-up."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # not Linux: the parent watchdog still covers it
        pass
    if os.getppid() != server_pid:
        os._exit(70)
    from topo.backends import child
    from topo.runtime import Grant, RegistryInfo

    program = init["program"]
    launcher_pid = init["launcher_pid"]
    os.environ.update(init.get("exe_env", {}).get(exe_id, {}))  # before the group's env
    rights = Grant.from_json(grant) if grant else None
    wipe(grant)
    spec = child.ChildSpec(
        program,
        exe_id,
        attempt,
        RegistryInfo(**init["registry"]),
        child.ChildOutput.in_run_dir(init["run_dir"], program, exe_id, init.get("log_limit")),
        init["disable_run"],
        grant=rights,
        devices_assigned=bool(init.get("devices_assigned", False)),  # on Ray: counts
        accelerators=init.get("accelerator_ids", {}).get(exe_id),
    )
    runs = _launcher_runs or still_running(launcher_pid)  # (the server's: since the start)
    child.child_main(spec, lambda: runs() and os.getppid() == server_pid)


# -- the server ---------------------------------------------------------------------


def warm_up() -> list[str]:
    """What every child needs whatever the program: topo's child set-up and runtime,
    numpy, and the node kinds (their entry points read once here, not in each child).
    Import problems, for the launcher."""
    errors = []
    try:
        from topo.backends.devices import hold_cpu_only

        hold_cpu_only()  # nothing this server imports opens an accelerator
        import topo.backends.child  # noqa: F401
        from topo.kinds import all_kinds

        all_kinds()
    except BaseException as exc:  # the child will fail with the full traceback
        errors.append(f"topo.backends.child: {exc!r}")
    try:  # node code nearly always uses it; topo's runtime imports it only when needed
        import numpy  # noqa: F401
    except ImportError:
        pass
    import psutil  # noqa: F401  (sweep_orphans; imported once, before the children fork)

    return errors


def _answer_check(targets: list[str], source: str | None) -> None:
    """Import ``targets`` (as the children will) and tell the launcher what it needs to
    check the nodes' arguments (``topo.targets.describe_targets``): the imports the run
    needs anyway, done once, here. ``targets: null`` if that cannot be said (the launcher
    then imports them itself)."""
    from topo.targets import describe_targets

    try:
        answer: dict[str, Any] | None = describe_targets(targets, source)
    except BaseException:  # a module that exits while imported, say: the launcher tries
        answer = None
    try:
        assert _status is not None
        _status.send(json.dumps({"t": "checked", "targets": answer}).encode())
    except OSError:  # e.g. too big for one datagram
        send_status(t="checked", targets=None)


def take_init(init: dict[str, Any]) -> None:
    """Apply what the launcher knew only after this server started: its output goes to
    ``init["log"]`` from now on (what it wrote before is moved there), and the import
    paths and ``PYTHONPATH`` are the launcher's once it compiled the program."""
    log = init.get("log")
    if log:
        sys.stdout.flush()
        sys.stderr.flush()
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            early = os.pread(1, os.fstat(1).st_size, 0)
        except OSError:  # not a file we can read back
            early = b""
        if early:
            os.write(fd, early)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    paths = init.get("sys_path")
    if paths:
        sys.path[1:1] = [p for p in dict.fromkeys(paths) if p not in sys.path]
    if init.get("pythonpath") is not None:
        os.environ["PYTHONPATH"] = init["pythonpath"]


def _import_modules(modules: Iterable[str]) -> list[str]:
    """Import each target module (imports only: no threads); what failed, for the launcher."""
    errors = []
    for module in modules:
        try:
            __import__(module)
        except BaseException as exc:  # the child will fail with the full traceback
            errors.append(f"{module}: {exc!r}")
    return errors


def _hold_sigterm() -> None:
    """In a Slurm step the launcher acts on: SIGTERM is a notice (``topo.runtime.sigterm``;
    imported after ``warm_up``, which imports the runtime and says why if it cannot)."""
    try:
        from topo.runtime.sigterm import hold_sigterm
    except ImportError:
        return
    hold_sigterm()


def serve(status_fd: int) -> None:
    """The fork server's main loop (runs in the server process's main thread)."""
    global _status
    import multiprocess
    from multiprocess.connection import wait

    from topo.backends.titles import set_title

    set_title("topo: fork server")
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher handles Ctrl-C
    become_subreaper()  # orphans of the executables' processes come back to this server
    keep_niceness()  # a new session: the launcher's niceness, for the whole program
    _status = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM, fileno=status_fd)
    errors = warm_up()  # meanwhile the launcher compiles the program
    _hold_sigterm()
    init = read_msg(0)
    while isinstance(init, tuple) and init[0] == "check":  # before the run: imports + args
        _answer_check(init[1], init[2])
        init = read_msg(0)
    if init is None:
        return
    take_init(init)
    from topo.ir import loads

    init["program"] = loads(init.pop("program_json"))
    set_title(f"topo: {init['program'].name} fork server")
    errors += _import_modules(init["modules"])
    # A launcher killed with SIGKILL stays a zombie until its parent reaps it: that one is
    # gone too (pid_alive counted it, and the run's socket directory was left behind).
    global _launcher_runs
    _launcher_runs = launcher_runs = still_running(init["launcher_pid"])
    import gc

    gc.collect()
    gc.freeze()  # keep imported objects out of the children's GC: fewer copy-on-write faults
    send_status(t="server", pid=os.getpid(), import_errors=errors)
    ctx = multiprocess.get_context("fork")
    children: dict[int, tuple[Any, str, int]] = {}  # exit fd -> (process, exe, attempt)
    me = os.getpid()
    next_sweep = time.monotonic() + SWEEP_INTERVAL_S
    try:
        while True:
            # Exit fds (pidfds) tell when an executable ended whatever its own children
            # inherited; where there are none (fd < 0), polling waitpid every 0.1 s does.
            watched = [fd for fd in children if fd >= 0]
            polled = [fd for fd in children if fd < 0]
            ready = wait([0, *watched], timeout=0.1 if polled else 0.5)
            if not launcher_runs():
                return
            ended = [fd for fd in [*ready, *polled] if fd != 0 and _has_ended(children[fd][0])]
            _end_executables([_forget(children, fd) for fd in ended], children)
            if 0 in ready:
                msg = read_msg(0)
                if msg is None or msg[0] == "shutdown":
                    return
                if msg[0] == "program":  # topo apply: later children run this program
                    _, program_json, modules, *more = msg
                    init["program"] = loads(program_json)
                    init.update(*more)  # (ray: the new executables' exe_env)
                    _import_modules(modules)  # (a child that cannot import says why)
                    gc.collect()
                    gc.freeze()
                    send_status(t="program", nodes=len(init["program"].nodes))
                if msg[0] == "check":  # topo apply: a new program's imports and arguments
                    _answer_check(msg[1], msg[2])
                if msg[0] == "spawn":
                    _, exe, attempt, size = msg
                    grant = read_blob(0, size)
                    if grant is None:
                        return
                    p = ctx.Process(
                        target=child_main,
                        args=(init, exe, attempt, me, grant),
                        name=f"topo-{exe}",
                        daemon=False,
                    )
                    try:
                        p.start()
                    finally:
                        wipe(grant)  # the child has its copy; later children get none
                    children[exit_fd(p.pid, children)] = (p, exe, attempt)
                    send_status(t="started", exe=exe, attempt=attempt, pid=p.pid)
            if time.monotonic() >= next_sweep:  # re-parented processes that ended on their own
                sweep_orphans(_live_pids(children), kill=False)
                next_sweep = time.monotonic() + SWEEP_INTERVAL_S
    finally:
        for p, _exe, _attempt in children.values():
            kill_tree(p.pid)
        for p, exe, attempt in children.values():
            _join(p, 5.0)
            send_status(t="exited", exe=exe, attempt=attempt, pid=p.pid, code=p.exitcode)
        sweep_orphans([], kill=True)
        if not launcher_runs():
            # The launcher died (kill -9): its registry could not remove the run's socket
            # directory, so the server that outlives it does.
            ipc_dir = init["registry"].get("ipc_dir")
            if ipc_dir:
                shutil.rmtree(ipc_dir, ignore_errors=True)


def exit_fd(pid: int, taken: Iterable[int] = ()) -> int:
    """A file descriptor that becomes readable when child ``pid`` ends (a pidfd, Linux
    5.3+), or a negative key not in ``taken`` where there is none (then it is polled).
    Not the child's ``multiprocess`` sentinel: that pipe stays open while any process
    the child forked (a ``multiprocessing`` fork-context worker) is alive."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return min([-1, *(k - 1 for k in taken if k < 0)])


def _has_ended(p: Any) -> bool:
    """True once child process ``p`` ended; it is left unreaped (a zombie leader keeps
    its process group's id from being reused until the group is killed)."""
    try:
        return os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _join(p: Any, timeout: float) -> None:
    """Wait up to ``timeout`` for child ``p`` to end and reap it (by pid: ``p.join``
    would wait on the sentinel, which the child's own children may hold open)."""
    end = time.monotonic() + timeout
    while p.exitcode is None and time.monotonic() < end:
        time.sleep(0.01)


def _forget(children: dict[int, tuple[Any, str, int]], fd: int) -> tuple[Any, str, int]:
    """Stop watching one executable (its pidfd closed); its entry."""
    entry = children.pop(fd)
    if fd >= 0:
        os.close(fd)
    return entry


def _end_executables(
    ended: list[tuple[Any, str, int]], children: dict[int, tuple[Any, str, int]]
) -> None:
    """Executables ended: kill what is left of their groups, join them, tell the launcher;
    then one sweep for all of them (what they left re-parented to this server)."""
    for p, exe, attempt in ended:
        kill_group(p.pid)  # its group outlives it (the unreaped leader keeps the pgid)
        p.join()
        send_status(t="exited", exe=exe, attempt=attempt, pid=p.pid, code=p.exitcode)
    if ended:
        sweep_orphans(_live_pids(children), kill=True)


def _live_pids(children: dict[int, tuple[Any, str, int]]) -> list[int]:
    return [p.pid for p, _exe, _attempt in children.values()]


if __name__ == "__main__":
    serve(int(sys.argv[1]))
