"""The pre-warmed fork server ("zygote") of the ``procs`` backend, and its children.

The launcher starts this module once per run as a fresh interpreter
(``python -m topo.backends.forkserver STATUS_FD``). It imports topo's runtime
and every node target's module -- imports only: no zmq context, no threads --
then forks one child per executable with ``multiprocess`` (fork context) from
its main thread, so children start in milliseconds with everything imported.

Channels: the launcher writes length-prefixed pickles to the server's stdin
(``init``, ``spawn``, ``shutdown``); the server and every child send JSON
datagrams to the launcher on an inherited ``AF_UNIX``/``SOCK_DGRAM`` socket
(``started``, ``exited``, node ``ready``/``finished``/``failed``).

Nothing is left behind: stdin EOF (the launcher died, even by ``kill -9``)
makes the server kill its children and exit; each child has
``PR_SET_PDEATHSIG=SIGKILL`` on the server and a watchdog thread polling the
launcher's pid.
"""

from __future__ import annotations

import ctypes
import json
import os
import pickle
import signal
import socket
import struct
import sys
import threading
import time
from typing import Any

PR_SET_PDEATHSIG = 1
_status: socket.socket | None = None


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


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def kill_tree(pid: int) -> None:
    """SIGKILL a child's process group (its own grandchildren included), else the child."""
    try:
        os.killpg(pid, signal.SIGKILL)
        return
    except (ProcessLookupError, PermissionError):
        pass
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# -- inside a child ---------------------------------------------------------------

def _watch_launcher(launcher_pid: int, server_pid: int) -> None:
    while True:
        time.sleep(0.25)
        if not _pid_alive(launcher_pid) or os.getppid() != server_pid:
            os._exit(70)


def _apply_resources(init: dict[str, Any], node_ids: tuple[str, ...]) -> None:
    from topo.ir import Program

    program: Program = init["program"]
    groups = {program.group_of(n).name: program.group_of(n) for n in node_ids}
    for group in groups.values():
        res = group.resources
        os.environ.update({k: str(v) for k, v in res.env.items()})
        if res.gpus is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in res.gpus)
        if res.cpus:
            os.sched_setaffinity(0, set(res.cpus))
        if res.workdir:
            os.makedirs(res.workdir, exist_ok=True)
            os.chdir(res.workdir)


def child_main(init: dict[str, Any], exe_id: str, attempt: int, server_pid: int) -> None:
    """Entry of a forked child: set up the process, run the executable, exit."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except Exception:  # not Linux: the watchdog thread still covers it
        pass
    if os.getppid() != server_pid:
        os._exit(70)
    code = 1
    try:
        os.setpgid(0, 0)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from topo.backends.logs import Stamped, exe_output_path, log_path, route_node_output
        from topo.backends.worker import run_executable
        from topo.runtime import RegistryInfo, connect_program, set_process_program

        program = init["program"]
        run_dir = init["run_dir"]
        exe = program.executable_index[exe_id]
        fd = os.open(exe_output_path(run_dir, program, exe_id),
                     os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        os.close(null)
        sys.stdout = Stamped(open(1, "w", buffering=1, closefd=False, errors="replace"))
        sys.stderr = Stamped(open(2, "w", buffering=1, closefd=False, errors="replace"))
        info = RegistryInfo(**init["registry"])
        if len(exe.nodes) > 1:
            route_node_output(info.program_id, {n: log_path(run_dir, n) for n in exe.nodes})
        _apply_resources(init, exe.nodes)
        threading.Thread(target=_watch_launcher, args=(init["launcher_pid"], server_pid),
                         name="topo-launcher-watch", daemon=True).start()
        context = connect_program(info)
        set_process_program(context)
        pid = os.getpid()

        def report(kind: str, node: str, text: str) -> None:
            send_status(t="node", kind=kind, node=node, exe=exe_id, attempt=attempt, pid=pid,
                        tb=text)

        code = run_executable(program, exe_id, context, report, init["disable_run"])
    except BaseException:
        import traceback

        text = traceback.format_exc()  # the launcher appends it to the node's log
        first = init["program"].executable_index[exe_id].nodes[0]
        send_status(t="node", kind="failed", node=first, exe=exe_id,
                    attempt=attempt, pid=os.getpid(), tb=text)
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


# -- the server ---------------------------------------------------------------------

def serve(status_fd: int) -> None:
    """The fork server's main loop (runs in the server process's main thread)."""
    global _status
    import multiprocess
    from multiprocess.connection import wait

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher handles Ctrl-C
    _status = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM, fileno=status_fd)
    init = read_msg(0)
    if init is None:
        return
    from topo.ir import loads

    init["program"] = loads(init.pop("program_json"))
    errors = []
    for module in ["topo.backends.worker", *init["modules"]]:
        try:
            __import__(module)
        except BaseException as exc:  # the child will fail with the full traceback
            errors.append(f"{module}: {exc!r}")
    launcher_pid = init["launcher_pid"]
    import gc

    gc.collect()
    gc.freeze()  # keep imported objects out of the children's GC: fewer copy-on-write faults
    send_status(t="server", pid=os.getpid(), import_errors=errors)
    ctx = multiprocess.get_context("fork")
    children: dict[int, tuple[Any, str, int]] = {}  # sentinel -> (process, exe, attempt)
    me = os.getpid()
    try:
        while True:
            ready = wait([0, *children], timeout=0.5)
            if not _pid_alive(launcher_pid):
                return
            for obj in ready:
                if obj == 0:
                    msg = read_msg(0)
                    if msg is None or msg[0] == "shutdown":
                        return
                    if msg[0] == "spawn":
                        _, exe, attempt = msg
                        p = ctx.Process(target=child_main, args=(init, exe, attempt, me),
                                        name=f"topo-{exe}", daemon=False)
                        p.start()
                        children[p.sentinel] = (p, exe, attempt)
                        send_status(t="started", exe=exe, attempt=attempt, pid=p.pid)
                else:
                    p, exe, attempt = children.pop(obj)
                    p.join()
                    send_status(t="exited", exe=exe, attempt=attempt, pid=p.pid,
                                code=p.exitcode)
    finally:
        for p, _exe, _attempt in children.values():
            kill_tree(p.pid)
        for p, exe, attempt in children.values():
            p.join(5)
            send_status(t="exited", exe=exe, attempt=attempt, pid=p.pid, code=p.exitcode)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
