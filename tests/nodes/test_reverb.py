"""kind: reverb at run time: a real dm-reverb server, peers get a reverb.Client."""

from __future__ import annotations

import importlib.util
import os
import pickle
import signal
import stat
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import pytest

# Not imported here: every worker collects this module, few run it (TensorFlow: ~3 CPU-s).
pytestmark = pytest.mark.skipif(importlib.util.find_spec("reverb") is None, reason="needs reverb")

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # reverb_nodes must import in the launcher and the fork server
    sys.path.insert(0, str(HERE))

from topo.kinds.clients import ReverbClient  # noqa: E402
from topo.testing import wait_gone, wait_until  # noqa: E402


def _topology(tmp_path: Path, replay_extra: str = "") -> Path:
    path = tmp_path / "rv.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: rv
        nodes:
          replay:
            kind: reverb
            tables: "reverb_nodes:make_tables"
            {replay_extra}
          user:
            target: "reverb_nodes:User"
            args: {{replay: "@replay"}}
        """)
    )
    return path


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["procs", "threads"])
def test_a_peer_inserts_and_samples_through_its_reverb_client(
    topo_launch: Callable, tmp_path: Path, backend: str
) -> None:
    run = topo_launch(_topology(tmp_path), backend, ready_timeout=120)
    user = run.handle("user", timeout=60)
    assert user.insert([7, 8, 9]) == 3
    assert user.size() == 3
    assert set(user.sample(20)) <= {7, 8, 9}
    # Its door is a Unix socket in the run's private socket directory; the Reverb
    # server itself listens only inside a network namespace of its own.
    address = run.handle("replay").address()
    assert address.startswith("unix:")
    door = Path(address[len("unix:") :])
    assert stat.S_IMODE(door.parent.stat().st_mode) == 0o700
    assert run.handle("replay").doors()["isolated"] is True
    with pytest.raises(RuntimeError, match="no checkpoint dir"):
        run.handle("replay").checkpoint()
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)


@pytest.mark.slow
def test_restarted_replay_restores_its_checkpoint_after_kill9(
    topo_launch: Callable, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    extra = (
        f"checkpoint: {{dir: '{ckpt}', every_s: 600}}\n"
        "            restart: {policy: on-failure, max_restarts: 2, backoff: {initial_s: 0.05}}"
    )
    run = topo_launch(_topology(tmp_path, extra), "procs", ready_timeout=120)
    user = run.handle("user", timeout=60)
    replay = run.handle("replay", timeout=60)
    user.insert(list(range(5)))
    path = replay.checkpoint()
    assert Path(path).is_relative_to(ckpt) and Path(path).exists()
    first_address = replay.address()
    victim = run.launcher.pids()["replay"]
    os.kill(victim, signal.SIGKILL)
    wait_until(lambda: run.launcher.state.nodes["replay"].restarts >= 1, 60)
    assert run.launcher.state.nodes["replay"].restarts == 1
    assert not wait_gone([victim], 15)
    assert replay.address() == first_address  # the restarted server took its port again
    assert user.size() == 5  # ... the peer's client follows it: the checkpoint's items
    assert user.reconnect() == first_address
    assert set(user.sample(10)) <= set(range(5))
    assert run.exit_code is None
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["threads", "procs"])
def test_a_reverb_node_without_checkpoints_leaves_nothing_in_the_temp_dir(
    topo_launch: Callable, tmp_path: Path, backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the fork server is remade for a new env
    monkeypatch.setattr(tempfile, "tempdir", None)
    run = topo_launch(_topology(tmp_path), backend, ready_timeout=120)
    assert run.handle("user", timeout=60).insert([1, 2]) == 2
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)
    assert sorted(p.name for p in temp.iterdir()) == []


@pytest.mark.slow
def test_a_table_factory_returning_no_tables_fails_the_node(
    topo_launch: Callable, tmp_path: Path
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        'name: bad\nnodes:\n  replay: {kind: reverb, tables: "reverb_nodes:not_tables"}\n'
    )
    run = topo_launch(path, "threads")
    assert run.wait(60) == 1
    assert run.failure is not None and run.failure.node == "replay"
    assert "must return a non-empty list of reverb.Table" in run.failure.traceback


def test_the_reverb_client_pickles_as_its_node_id() -> None:
    client = pickle.loads(pickle.dumps(ReverbClient("replay", 5.0)))
    assert client.node_id == "replay" and client._client is None


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["threads", "procs"])
def test_writers_held_back_by_the_rate_limiter_end_cleanly_at_the_stop(
    topo_launch: Callable, tmp_path: Path, backend: str
) -> None:
    path = tmp_path / "held.yaml"
    path.write_text(
        textwrap.dedent("""
        name: held
        nodes:
          replay: {kind: reverb, tables: "reverb_nodes:make_limited_tables"}
          writer:
            target: "reverb_nodes:Writer"
            count: 2
            args: {replay: "@replay"}
        """)
    )
    run = topo_launch(path, backend, ready_timeout=120)
    writers = [run.handle(f"writer/{i}", timeout=30) for i in range(2)]
    counts = [-1, -1]

    def held_back() -> bool:  # their counts stop moving: the same twice, 0.3 s apart
        now = [w.count() for w in writers]
        still = now == counts and all(c > 0 for c in now)
        counts[:] = now
        return still

    wait_until(held_back, 30, what="the rate limiter to hold the writers back", every=0.3)
    start = time.monotonic()
    assert run.stop(timeout=60) == 0
    assert time.monotonic() - start < 4.5  # released, not killed after the 5 s grace period
    assert not any("killed" in w for w in run.launcher.state.warnings), run.launcher.state.warnings
    assert {s.state for s in run.status() if s.id.startswith("writer")} == {"finished"}
