"""``lp.launch``: a Launchpad program compiled to topo's IR and started on a backend.

``local_mt``/``test_mt`` run on the ``threads`` backend, ``local_mp``/``test_mp`` on
``procs`` (or any backend by name with ``backend=``). The launched program is
returned; ``test_*`` launches stop it in the test case's cleanup, ``local_*`` launches
wait for it when the script ends, as Launchpad does.
"""

from __future__ import annotations

import atexit
import builtins
import enum
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from topo.api import RunningProgram
from topo.api import launch as topo_launch
from topo.launchpad import live
from topo.launchpad.compile import Compiled, ProgramError, compile_program
from topo.launchpad.nodes.base import Node
from topo.launchpad.program import Program

log = logging.getLogger("topo.launchpad")

_POLL_S = 0.05
_UP_S = 60.0  # how long dereference() waits for a node with a call deadline


class LaunchType(enum.Enum):
    """Launchpad's launch types that run on this machine."""

    LOCAL_MULTI_THREADING = "local_mt"
    LOCAL_MULTI_PROCESSING = "local_mp"
    TEST_MULTI_THREADING = "test_mt"
    TEST_MULTI_PROCESSING = "test_mp"

    @property
    def backend(self) -> str:
        """The topo backend this launch type runs on."""
        return "threads" if self.value.endswith("_mt") else "procs"

    @property
    def is_test(self) -> bool:
        """A test launch: stopped by the test case's cleanup, nothing waits at exit."""
        return self.value.startswith("test_")


class NodeFailure(RuntimeError):
    """A node of a launched program failed; the message holds its traceback."""

    def __init__(self, node_id: str, traceback: str) -> None:
        self.node_id = node_id
        self.traceback = traceback
        super().__init__(f"node {node_id} failed:\n{traceback.rstrip()}")


class Launched:
    """A launched Launchpad program (what Launchpad's worker manager is to its users):
    ``wait``, ``stop``, and the topo run underneath (``run``)."""

    def __init__(self, compiled: Compiled, run: RunningProgram) -> None:
        self.compiled = compiled
        self.run = run
        self.live_objects: list[str] = []  # objects given as they are (serialize_py_nodes=False)
        self._ended: threading.Event | None = None

    @property
    def program(self) -> Any:
        """The topo Program IR that runs."""
        return self.compiled.program

    @property
    def stop_event(self) -> threading.Event:
        """Set once the program has ended (one event, however often asked)."""
        with _lock:
            if self._ended is None:
                self._ended = threading.Event()
                threading.Thread(target=self._watch_end, name="topo-lp-ended", daemon=True).start()
        return self._ended

    def _watch_end(self) -> None:
        self.run.launcher.wait()
        assert self._ended is not None
        self._ended.set()

    def node_id(self, node: Node) -> str:
        """The topo node id of a Launchpad node of this program (KeyError if absent)."""
        return self.compiled.node_ids[node.uid]

    def wait(
        self,
        labels_to_wait_on: Sequence[str] | None = None,
        timeout: float | None = None,
        return_on_first_completed: bool = False,
        raise_error: bool = True,
    ) -> int | None:
        """Wait for the program to end -- or for the nodes of ``labels_to_wait_on`` to
        finish -- and re-raise a node's failure (``raise_error``). The exit code, or None
        when ``timeout`` passed (or the labels' nodes ended while the program runs)."""
        if isinstance(labels_to_wait_on, str):
            labels_to_wait_on = [labels_to_wait_on]
        elif labels_to_wait_on is not None and not isinstance(labels_to_wait_on, Sequence):
            raise TypeError(
                f"wait() takes a list of labels first, got {labels_to_wait_on!r} (a timeout "
                "is wait(timeout=seconds))"
            )
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            if labels_to_wait_on or return_on_first_completed:
                labels = labels_to_wait_on or [g.label or g.name for g in self.program.groups]
                self._wait_labels(labels, deadline, return_on_first_completed)
                code = self.run.exit_code
            else:
                code = self.run.wait(
                    None if deadline is None else max(0.0, deadline - time.monotonic())
                )
        except KeyboardInterrupt:
            self.run.stop()
            raise
        if raise_error:
            self._raise_failure()
        return code

    def _wait_labels(self, labels: Sequence[str], deadline: float | None, first: bool) -> None:
        groups = {g.label or g.name: g.name for g in self.program.groups}
        unknown = [label for label in labels if label not in groups]
        if unknown:
            raise ValueError(f"no group labelled {unknown[0]!r} (labels: {', '.join(groups)})")
        wanted = [n.id for n in self.program.nodes if n.group in {groups[x] for x in labels}]
        while self.run.exit_code is None:
            states = [self.run.launcher.nodes[n].state for n in wanted]
            ended = [s in ("finished", "failed") for s in states]
            if "failed" in states or (any(ended) if first else all(ended)):
                return
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(_POLL_S)

    def _raise_failure(self) -> None:
        failure = self.run.failure
        if failure is None:
            for status in self.run.status():
                if status.state == "failed":
                    raise NodeFailure(status.id, status.last_line)
            return
        raise _exception_for(failure.node, failure.traceback or failure.message)

    def stop(self, timeout: float | None = None) -> int | None:
        """Stop the program and wait for it (up to ``timeout``)."""
        return self.run.stop("stopped by lp.stop()", timeout)

    def dereference(self, node: Node) -> Any:
        """A client of ``node`` for the calling (non-node) thread."""
        node_id = self.node_id(node)
        timeout = self.program.rpc_of(node_id).call_timeout_s
        if timeout is not None:  # a short deadline counts from when the node is up
            self._wait_up(node_id, _UP_S)
        return self.run.handle(node_id, timeout)

    def _wait_up(self, node_id: str, limit: float) -> None:
        end = time.monotonic() + limit
        status = self.run.launcher.nodes[node_id]
        while status.state in ("pending", "starting") and self.run.exit_code is None:
            if time.monotonic() >= end:
                return
            time.sleep(_POLL_S)


def _exception_for(node_id: str, traceback: str) -> BaseException:
    """The node's exception re-created where its type is a built-in one (so a test can
    expect a ``ValueError``), with the node's traceback as its cause; else NodeFailure."""
    cause = NodeFailure(node_id, traceback)
    last = traceback.strip().splitlines()[-1] if traceback.strip() else ""
    match = re.match(r"^([A-Za-z_][A-Za-z0-9_]*)(?::\s?(.*))?$", last)
    if match:
        cls = getattr(builtins, match.group(1), None)
        if isinstance(cls, type) and issubclass(cls, Exception):
            try:
                exc = cls(f"node {node_id}: {match.group(2) or ''}".rstrip(": "))
            except Exception:
                return cause
            exc.__cause__ = cause
            return exc
    return cause


_launched: list[Launched] = []
_lock = threading.Lock()


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
    if not isinstance(programs, Program):
        if not programs:
            raise ValueError("lp.launch needs a program")
        programs = programs[0]
    backend = backend or kind.backend
    kept: list[str] = []
    keep = None
    if backend == "threads":
        _check_thread_resources(programs, local_resources, kind)
        local_resources = None
        if serialize_py_nodes is False:

            def keep(obj: Any) -> str:
                kept.append(live.keep(obj))
                return kept[-1]

    from topo.backends.base import get_backend

    runner = get_backend(backend, **dict(backend_options or {}))
    warm = runner.warm_up()  # procs: the fork server imports while the program compiles
    try:
        compiled = _compile(programs, local_resources, seed, keep, kind, backend)
        run = topo_launch(
            compiled.program,
            runner,
            log_dir=log_dir,
            listeners=() if kind.is_test else [_Printer(compiled.program)],
        )
    except BaseException:
        live.release(kept)
        if warm:  # a program that cannot run: the warmed-up fork server ends here
            runner.close()
        raise
    launched = Launched(compiled, run)
    launched.live_objects = kept
    _prune()
    with _lock:
        _launched.append(launched)
    if test_case is not None:
        test_case.addCleanup(_cleanup, launched)
    elif not kind.is_test:
        _wait_at_exit(launched)
    return launched


class _Printer:
    """Node output and failures on the terminal, for ``local_*`` launches (each line
    prefixed with its node); every line also goes to the run directory's logs."""

    def __init__(self, program: Any) -> None:
        self.width = min(24, max((len(n.id) for n in program.nodes), default=4))

    def __call__(self, event: Any) -> None:
        if event.kind == "log" and event.node is not None:
            print(f"{event.node:<{self.width}} | {event.message}", flush=True)
        elif event.kind == "failed" and event.message:
            print(f"{'topo':<{self.width}} | failed: {event.message}", flush=True)
        elif event.kind == "stopping":
            print(f"{'topo':<{self.width}} | stopping: {event.message}", flush=True)


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
    _prune()
    launched._raise_failure()


def _prune() -> None:
    """Forget launches that have ended (and the objects they were handed)."""
    with _lock:
        ended = [x for x in _launched if x.run.exit_code is not None]
        for x in ended:
            _launched.remove(x)
    for x in ended:
        live.release(x.live_objects)


def _wait_at_exit(launched: Launched) -> None:
    """A ``local_*`` launch keeps the script alive until the program ends (Ctrl-C stops).
    A node failure that ended it is printed and the script exits with status 1."""

    def wait() -> None:
        try:
            launched.run.wait()
        except KeyboardInterrupt:
            print("topo | Ctrl-C: stopping the program (Ctrl-C again kills it)", flush=True)
            try:
                launched.run.stop()
            except KeyboardInterrupt:
                launched.run.kill()
                launched.run.wait(10)
            atexit._run_exitfuncs()  # the script's own exit handlers, then the status
            sys.stdout.flush()
            os._exit(130)  # what a shell expects after Ctrl-C; the program is stopped
        try:
            launched._raise_failure()
        except BaseException as exc:
            _exit_failed(launched, exc)

    register = getattr(threading, "_register_atexit", None)
    if register is not None:  # before daemon threads are stopped, like Launchpad
        register(wait)
    else:  # pragma: no cover
        atexit.register(wait)
    _stop_on_ctrl_c()


def _exit_failed(launched: Launched, exc: BaseException) -> None:
    """Report the failure that ended a local launch and end the script with status 1
    (the other exit handlers run first: the interpreter cannot be given a status later)."""
    cause = exc if isinstance(exc, NodeFailure) else exc.__cause__
    text = str(cause) if cause is not None else f"{type(exc).__name__}: {exc}"
    print(f"lp.launch: program {launched.program.name!r} failed -- {text}", file=sys.stderr)
    print(f"(logs: {launched.run.run_dir})", file=sys.stderr)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


_ctrl_c_installed = False


def _stop_on_ctrl_c() -> None:
    """Ctrl-C at any point of the script stops its local launches (else a Ctrl-C before
    the script's end would leave the at-exit wait waiting on a running program); the
    previous handler still runs (``KeyboardInterrupt``)."""
    global _ctrl_c_installed
    if threading.current_thread() is not threading.main_thread() or _ctrl_c_installed:
        return
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous):  # SIGINT ignored, as for a background job: leave it
        return
    _ctrl_c_installed = True

    def on_sigint(signum: int, frame: Any) -> Any:
        with _lock:
            running = [x for x in _launched if x.run.exit_code is None]
        for launched in running:
            launched.run.launcher.request_stop("interrupted (Ctrl-C)")
        return previous(signum, frame)

    signal.signal(signal.SIGINT, on_sigint)


def dereference(node: Node) -> Any:
    """A client of ``node`` in the newest launched program that holds it."""
    with _lock:
        runs = list(reversed(_launched))
    for launched in runs:
        if node.uid in launched.compiled.node_ids:
            return launched.dereference(node)
    raise RuntimeError(
        f"{node.describe()} is not part of a launched program: call lp.launch(program) "
        "first, then dereference its handles"
    )


def last_launched() -> Launched | None:
    """The most recent launch still running, if any (``lp.stop()`` outside a node)."""
    with _lock:
        for launched in reversed(_launched):
            if launched.run.exit_code is None:
                return launched
    return None
