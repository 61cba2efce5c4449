"""The seams new backends plug into: registry network/auth, check, node status over the
registry, log source, options and the backend table."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from bk_backends import CurveProcs, CurveThreads, RemoteLogs

from topo.api import launch
from topo.backends.base import Backend, BackendNotFound, available_backends, get_backend
from topo.diagnostics import TopoError
from topo.runtime import (
    PeerUnavailable,
    PermissionDenied,
    RegistryClient,
    RegistryServer,
    new_program_id,
    new_secret,
)

TALKERS = """
    name: talkers
    nodes:
      echo: {target: "bk_nodes:Echo", count: 2}
      stopper: {target: "bk_nodes:Stopper", args: {peers: "@echo", delay: 0.1}}
"""


def _in_fresh_thread(fn: Callable[[], object]) -> object:
    """``fn()``'s result or exception, called in a new thread: client connections are
    pooled per thread and program, so a new thread really makes a new handshake."""
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(fn())
        except Exception as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    caller.join(60)
    return outcome[0]


@pytest.mark.parametrize("backend_class", [CurveThreads, CurveProcs])
def test_a_backend_asking_for_curve_gets_a_curve_registry_and_its_nodes_talk(
    topo_launch: Callable, topology: Callable, backend_class: type[Backend]
) -> None:
    run = topo_launch(topology(TALKERS), backend_class())
    assert run.wait(60) == 0, run.launcher.state.stop_reason
    assert run.launcher.registry.info.mechanism == "curve"
    assert "answers: ['pong', 'pong']" in run.log("stopper")


def test_a_plain_client_cannot_join_a_curve_program(
    topo_launch: Callable, topology: Callable
) -> None:
    run = topo_launch(
        topology("name: one\nnodes:\n  echo: {target: 'bk_nodes:Echo'}\n"),
        CurveThreads(),
        disable_run=True,
        ready_timeout=60,
    )
    assert run.handle("echo").ping() == "pong"
    info = run.launcher.registry.info
    plain = RegistryClient(replace(info, mechanism="plain"), call_timeout=1.0)
    try:
        result = _in_fresh_thread(lambda: plain.lookup("echo"))
    finally:
        plain.close()
    assert isinstance(result, PeerUnavailable), result


def test_node_status_reaches_the_launcher_through_the_registry() -> None:
    got: list[tuple[object, ...]] = []
    arrived = threading.Event()

    def on_report(*args: object) -> None:
        got.append(args)
        arrived.set()

    registry = RegistryServer(new_program_id(), new_secret(), on_report=on_report)
    client = RegistryClient(registry.info)
    intruder = RegistryClient(replace(registry.info, secret=new_secret()), call_timeout=0.5)
    try:
        client.report("failed", "a/0", "a/0", 3, 4242, "Traceback ...")
        assert arrived.is_set()  # report() returns once the registry has it
        assert got == [("failed", "a/0", "a/0", 3, 4242, "Traceback ...")]
        t0 = time.monotonic()
        refused = _in_fresh_thread(lambda: intruder.report("ready", "a/0", "a/0", 3, 1, ""))
        # Refused in the handshake, and told so at once (not at its deadline).
        assert isinstance(refused, PermissionDenied), refused
        assert "registry refused" in str(refused) and time.monotonic() - t0 < 5
        assert len(got) == 1
    finally:
        client.close()
        intruder.close()
        registry.close()


RESOURCES = """
    name: pinned
    nodes:
      fine: {target: "bk_nodes:Echo"}
      pinned:
        target: "bk_nodes:Echo"
        resources: {env: {A: "1"}, cpus: [0]}
"""


def test_threads_refuses_process_wide_resources_before_anything_starts(
    topology: Callable, tmp_path: Path
) -> None:
    path = topology(RESOURCES)
    with pytest.raises(TopoError) as caught:
        launch(path, "threads", log_dir=tmp_path / "runs")
    (d,) = caught.value.diagnostics
    assert d.pos is not None and d.pos.file == str(path) and d.pos.line == 5
    assert "'pinned'" in d.message and "env, cpus" in d.message
    assert d.hint is not None and "--backend procs" in d.hint
    assert not (tmp_path / "runs").exists()


def test_threads_accepts_host_labels(topo_launch: Callable, topology: Callable) -> None:
    path = topology("""
        name: labelled
        nodes:
          echo: {target: "bk_nodes:Echo", resources: {host_labels: [gpu]}}
    """)
    run = topo_launch(path, "threads", disable_run=True, ready_timeout=60)
    assert run.handle("echo").ping() == "pong"


def test_a_setup_failure_in_the_child_reaches_the_launcher(
    topo_launch: Callable, topology: Callable, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    path = topology(f"""
        name: badwd
        nodes:
          echo: {{target: "bk_nodes:Echo", resources: {{workdir: "{blocker}/sub"}}}}
    """)
    run = topo_launch(path, "procs")
    assert run.wait(60) == 1
    assert run.failure is not None and run.failure.node == "echo"
    assert "NotADirectoryError" in run.failure.traceback
    assert "apply_resources" in run.failure.traceback


def test_log_lines_come_from_the_backends_log_source(
    topo_launch: Callable, topology: Callable
) -> None:
    path = topology("""
        name: hello
        nodes:
          hi: {kind: py, target: "bk_nodes:hello"}
    """)
    run = topo_launch(path, RemoteLogs())
    assert run.wait(60) == 0
    assert run.launcher.state.nodes["hi"].last_line == "[host-a] hello from hi"


def test_unknown_backends_say_what_is_available() -> None:
    with pytest.raises(
        BackendNotFound, match="unknown backend 'nope'; available: procs, ray, slurm, ssh, threads"
    ):
        get_backend("nope")
    with pytest.raises(TypeError, match="does not take the option"):
        get_backend("procs", inventory="hosts.yaml")
    assert {"procs", "ray", "ssh", "threads"} <= set(available_backends())


def test_an_unsupported_kind_is_a_diagnostic_at_its_group(
    topology: Callable, tmp_path: Path
) -> None:
    from topo.kinds import NodeKind, Options, register_kind, unregister_kind

    why = "node kind 'notyet' is not supported by topo run yet"
    register_kind(NodeKind("notyet", "a kind topo run refuses", Options, runnable=why))
    path = topology("""
        name: rev
        nodes:
          echo: {target: "bk_nodes:Echo"}
          replay: {kind: notyet}
    """)
    try:
        with pytest.raises(TopoError) as caught:
            launch(path, "procs", log_dir=tmp_path / "runs")
    finally:
        unregister_kind("notyet")
    (d,) = caught.value.diagnostics
    assert why in d.message
    assert d.pos is not None and (d.pos.file, d.pos.line) == (str(path), 5)
    assert not (tmp_path / "runs").exists()


def test_a_backend_that_cannot_open_leaves_nothing_running(
    topology: Callable, tmp_path: Path
) -> None:
    """``Backend.open`` failing (say, every host's connection broke after the checks)
    raises to the caller, and the registry, log tailer and backend are closed."""
    from topo.backends.threads import ThreadsBackend

    closed = []

    class NoHosts(ThreadsBackend):
        def open(self, job: object, sink: object) -> None:
            raise RuntimeError("no host could start an agent")

        def close(self) -> None:
            closed.append(True)

    path = topology("""
        name: hello
        nodes:
          hi: {target: "bk_nodes:Echo"}
    """)
    before = {t.ident for t in threading.enumerate()}
    with pytest.raises(RuntimeError, match="no host could start an agent"):
        launch(path, NoHosts(), log_dir=tmp_path / "runs")
    assert closed == [True]
    left = [
        t.name
        for t in threading.enumerate()
        if t.ident not in before and t.is_alive() and t.name != "topo-zap"  # process-wide
    ]
    assert not left, f"threads left running: {left}"
