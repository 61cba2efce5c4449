"""The reverb node's server process ends by itself, and soon, when told to stop: both the
forked child and the fresh interpreter (started where gRPC or JAX already run in the
node's process: the threads backend, a learner colocated with its replay). The fresh
interpreter used to sit in its own exit (TensorFlow's and gRPC's teardown) until the
parent's SIGKILL 5 s later, which put every stop of such a node past the default grace."""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import pytest

# Not imported here: every worker collects this module, few run it (TensorFlow: ~3 CPU-s).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("reverb") is None, reason="needs reverb")

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the fresh interpreter imports the tables from here too
    sys.path.insert(0, str(HERE))

from topo.nodes import reverb_jail  # noqa: E402
from topo.testing import wait_gone  # noqa: E402

STOP_WITHIN_S = 3.0  # the parent SIGKILLs after 2 s (5 s before); a clean stop takes < 1 s


@pytest.mark.slow
@pytest.mark.parametrize("start", ["fork", "fresh interpreter"])
def test_the_reverb_server_process_ends_by_itself_at_the_stop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, start: str
) -> None:
    monkeypatch.setattr(reverb_jail, "_grpc_running", lambda: start != "fork")
    spec = reverb_jail.JailSpec(
        tables="reverb_nodes:make_tables",
        table_args={},
        checkpoint_path=str(tmp_path / "checkpoints"),
        unix_path=str(tmp_path / "reverb.sock"),
    )
    jail = reverb_jail.Jail(spec, ready_timeout_s=300)
    pid = jail.pid
    try:
        assert jail.alive()
        jail.request("release", timeout_s=60)
        began = time.monotonic()
        jail.stop()
        took = time.monotonic() - began
    finally:
        if jail.alive():
            jail.stop(1.0)
    assert not jail.killed, f"the {start} child did not end by itself; killed after {took:.1f}s"
    assert took < STOP_WITHIN_S
    assert not wait_gone([pid], 5)


def test_another_node_of_the_process_makes_the_server_a_fresh_interpreter() -> None:
    """A node colocated with the replay may be starting JAX or gRPC while the replay
    starts its server: a fork then could copy a lock held by that node's thread."""
    import threading

    release = threading.Event()
    alone = reverb_jail._grpc_running()
    other = threading.Thread(target=release.wait, name="topo-node-learner", daemon=True)
    other.start()
    try:
        assert reverb_jail._grpc_running()
    finally:
        release.set()
        other.join()
    assert reverb_jail._grpc_running() == alone
