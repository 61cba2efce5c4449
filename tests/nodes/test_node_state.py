"""The built-in nodes' state for program snapshots: ``save()`` then ``restore()`` into a new
node continues where the old one was (counter, steps limiter, cacher, reverb)."""

from __future__ import annotations

import io
import sys
import tarfile
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from topo.nodes import Cacher, Counter, StepsLimiter
from topo.runtime import ProgramContext, node_scope
from topo.testing import wait_gone, wait_until

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # reverb_nodes must import in the launcher and the fork server
    sys.path.insert(0, str(HERE))


# --- counter -------------------------------------------------------------------------


def test_a_restored_counter_continues_from_the_saved_counts() -> None:
    c = Counter()
    c.increment(steps=41, episodes=3)
    c.increment(steps=0.5)
    state = c.save()
    assert state == {"counts": {"steps": 41.5, "episodes": 3}, "unsynced": {}}
    fresh = Counter()
    fresh.restore(state)
    assert fresh.get_counts() == {"steps": 41.5, "episodes": 3}
    assert fresh.increment(steps=1) == {"steps": 42.5, "episodes": 3}
    c.increment(steps=100)  # the saved state is a copy, not a view
    assert state["counts"]["steps"] == 41.5


def test_increments_a_child_had_not_forwarded_reach_the_restored_parent_once() -> None:
    parent = Counter()
    actor = Counter(parent, prefix="actor", time_delta=3600.0)
    actor.increment(steps=5)  # the first increment syncs at once
    actor.increment(steps=2)  # these two wait for the next sync
    assert parent.get_counts() == {"actor_steps": 5}
    parent_state, actor_state = parent.save(), actor.save()  # one snapshot, both nodes
    assert actor_state == {"counts": {"steps": 7}, "unsynced": {"steps": 2}}

    new_parent = Counter()
    new_parent.restore(parent_state)
    new_actor = Counter(new_parent, prefix="actor", time_delta=3600.0)
    new_actor.restore(actor_state)
    # The next increment syncs (a restored child does not wait out time_delta), carrying
    # the two pending steps and the new one: every step counted once.
    assert new_actor.increment(steps=1)["actor_steps"] == 8
    assert new_parent.get_counts() == {"actor_steps": 8}
    assert new_actor.get_counts()["actor_steps"] == 8


def test_a_counter_takes_plain_counts_and_refuses_what_is_not_counts() -> None:
    parent = Counter()
    learner = Counter(parent, prefix="learner", time_delta=0.0)
    learner.restore({"steps": 10})  # as the examples' learners restore their counter
    assert learner.increment(steps=1) == {"learner_steps": 11}
    assert parent.get_counts() == {"learner_steps": 1}  # known to the parent: not resent
    with pytest.raises(ValueError, match="numbers by name"):
        Counter().restore({"counts": {"steps": "ten"}})
    with pytest.raises(ValueError, match="a counter's state is"):
        Counter().restore([("steps", 1)])  # type: ignore[arg-type]


# --- steps limiter, cacher -------------------------------------------------------------


def test_a_limiter_over_a_counter_restored_at_60_percent_stops_at_the_same_max_steps() -> None:
    assert not hasattr(StepsLimiter, "save")  # topo saves nothing for it: the counter
    old = Counter()
    old.increment(actor_steps=60)
    counter = Counter()
    counter.restore(old.save())
    program = ProgramContext.local(default_deadline=10)
    limiter = StepsLimiter(counter, max_steps=100, poll_s=0.01)
    done = threading.Event()

    def run() -> None:
        with node_scope(program, None):
            limiter.run()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    try:
        for _ in range(40):  # 60 -> 100: the limit reached, not exceeded
            counter.increment(actor_steps=1)
            time.sleep(0.005)
        assert not program.stop_event.wait(0.3)
        assert limiter.steps_seen == 100
        counter.increment(actor_steps=1)
        assert program.stop_event.wait(5)
        assert done.wait(5)
        assert limiter.steps_seen == 101
        reason = program.address_book.stop_reason()
        assert reason is not None and "actor_steps reached 101, over 100" in reason[0]
    finally:
        program.address_book.request_stop("test over")
        assert done.wait(5)


def test_a_cacher_has_no_state() -> None:
    assert not hasattr(Cacher, "save") and not hasattr(Cacher, "restore")


# --- reverb: the state's format ----------------------------------------------------


def test_a_reverb_state_is_refused_unless_it_is_a_whole_checkpoint(tmp_path: Path) -> None:
    pytest.importorskip("reverb")
    from topo.nodes.reverb import _packed, _unpacked

    checkpoint = tmp_path / "2026-01-01T00:00:00+00:00"
    checkpoint.mkdir()
    for name in ("tables.tfrecord", "items.tfrecord", "chunks.tfrecord", "DONE"):
        (checkpoint / name).write_bytes(name.encode())
    space = tmp_path / "space"
    space.mkdir()
    state = _packed(str(checkpoint), str(space))
    assert list(space.iterdir()) == []  # its tar file is gone
    out = Path(_unpacked(state, str(tmp_path / "out")))
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in checkpoint.iterdir())
    assert (out / "items.tfrecord").read_bytes() == b"items.tfrecord"

    def tar_of(*members: tuple[str, bytes]) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for name, data in members:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return buf.getvalue()

    for bad, why in [
        ({"tables": 1}, "got dict"),
        (b"not a tar at all" * 64, "not a readable tar"),
        (tar_of(("checkpoint/items.tfrecord", b"x")), "no DONE mark"),
        (tar_of(("checkpoint/DONE", b""), ("../evil", b"x")), "unexpected"),
        (tar_of(("checkpoint/DONE", b""), ("checkpoint/../../evil", b"x")), "not a readable"),
    ]:
        with pytest.raises(ValueError, match=why):
            _unpacked(bad, str(tmp_path / "bad"))
    assert not (tmp_path / "evil").exists()


# --- reverb: a real server, saved and restored -------------------------------------


def _program(path: Path, replay: str) -> Path:
    """A program of a replay (``replay``: the node's YAML lines) and a QueueUser of it."""
    lines = "".join(f"    {line}\n" for line in replay.splitlines())
    path.write_text(
        f"name: {path.stem}\nnodes:\n  replay:\n{lines}"
        '  user:\n    target: "reverb_nodes:QueueUser"\n    args: {replay: "@replay"}\n'
    )
    return path


def _replay(target: str, **args: object) -> str:
    """The YAML lines of a replay node of class ``target`` over the two tables."""
    items = "".join(f", {k}: {v!r}" for k, v in args.items())
    return f'target: "{target}"\nargs: {{tables: "reverb_nodes:make_state_tables"{items}}}'


@pytest.fixture
def private_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A TMPDIR of the test's own, to check the nodes leave nothing in it."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the fork server is remade for a new env
    monkeypatch.setattr(tempfile, "tempdir", None)
    return temp


@pytest.mark.slow
@pytest.mark.parametrize("isolated", [True, False], ids=["namespace", "fallback"])
def test_a_restored_replay_serves_the_saved_items(
    topo_launch: Callable, tmp_path: Path, private_tmp: Path, isolated: bool
) -> None:
    n = 300
    saver = "topo.nodes.reverb:ReverbServer" if isolated else "reverb_nodes:UnisolatedReverb"
    run = topo_launch(_program(tmp_path / "a.yaml", _replay(saver)), "procs", ready_timeout=120)
    user = run.handle("user", timeout=60)
    assert user.insert(list(range(n))) == n
    state = run.handle("replay", timeout=60).save()
    assert isinstance(state, bytes) and state[257:262] == b"ustar"  # a tar
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)

    state_file = tmp_path / "replay.state"
    state_file.write_bytes(state)
    restored = _replay("reverb_nodes:RestoredReverb", state_file=str(state_file), isolate=isolated)
    run = topo_launch(_program(tmp_path / "b.yaml", restored), "procs", ready_timeout=120)
    user, replay = run.handle("user", timeout=60), run.handle("replay", timeout=60)
    assert replay.doors()["isolated"] is isolated
    assert user.sizes() == {"uniform": n, "queue": n}
    assert set(user.sample(2 * n)) <= set(range(n))
    assert user.take(n) == list(range(n))  # every item, its content, in insertion order
    assert user.sizes() == {"uniform": n, "queue": 0}
    # A state that is not one is refused, and the node serves on as it was.
    with pytest.raises(Exception, match="not a readable tar"):
        replay.restore(b"junk" * 512)
    assert user.sizes() == {"uniform": n, "queue": 0}
    if not isolated:  # the restored server's port is a new one: the warning says which
        assert run.log("replay").count("is open to every host") == 2
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)
    assert sorted(p.name for p in private_tmp.iterdir()) == []  # no scratch left


@pytest.mark.slow
def test_a_restored_replay_takes_the_snapshot_over_a_newer_checkpoint_in_its_dir(
    topo_launch: Callable, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    kind = 'kind: reverb\ntables: "reverb_nodes:make_state_tables"\n'
    kind += f"checkpoint: {{dir: '{ckpt}'}}"
    run = topo_launch(_program(tmp_path / "a.yaml", kind), "procs", ready_timeout=120)
    user, replay = run.handle("user", timeout=60), run.handle("replay", timeout=60)
    user.insert(list(range(100)))
    state = replay.save()
    user.insert(list(range(100, 150)))
    newer = Path(replay.checkpoint())  # the newest in the dir holds 150 items
    assert newer.parent == ckpt
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)

    state_file = tmp_path / "replay.state"
    state_file.write_bytes(state)
    restored = _replay(
        "reverb_nodes:RestoredReverb", state_file=str(state_file), checkpoint_dir=str(ckpt)
    )
    run = topo_launch(_program(tmp_path / "b.yaml", restored), "procs", ready_timeout=120)
    user, replay = run.handle("user", timeout=60), run.handle("replay", timeout=60)
    assert user.sizes() == {"uniform": 100, "queue": 100}  # the snapshot's, not the newer
    assert user.take(3) == [0, 1, 2]
    path = Path(replay.checkpoint())  # ... and its checkpoints go to the dir as before
    assert path.parent == ckpt and (path / "DONE").exists()
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)
    # Its stop checkpoint too (Reverb keeps the newest): the state's items, less the 3 taken.
    (last,) = [p for p in ckpt.iterdir() if (p / "DONE").exists()]
    assert last != newer


@pytest.mark.slow
def test_a_replay_saved_while_its_writer_is_paused_holds_what_the_writer_counted(
    topo_launch: Callable, tmp_path: Path
) -> None:
    from topo.runtime.pause import gate_of

    path = tmp_path / "paced.yaml"
    path.write_text(
        textwrap.dedent("""
        name: paced
        nodes:
          replay: {kind: reverb, tables: "reverb_nodes:make_state_tables"}
          pacer:
            target: "reverb_nodes:Pacer"
            args: {replay: "@replay"}
        """)
    )
    run = topo_launch(path, "threads", ready_timeout=120)
    pacer, replay = run.handle("pacer", timeout=60), run.handle("replay", timeout=60)
    wait_until(lambda: pacer.count() >= 200, 60, what="200 pacer steps")
    gate = gate_of("pacer")  # the threads backend runs the node in this process
    assert gate.pause(10) == []
    try:
        counted = pacer.count()
        time.sleep(0.2)  # held still a while: what a pause is
        assert pacer.count() == counted  # held
        state = replay.save()
    finally:
        gate.resume()
    wait_until(lambda: pacer.count() > counted, 30, what="the pacer going again")
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)

    state_file = tmp_path / "replay.state"
    state_file.write_bytes(state)
    restored = _replay("reverb_nodes:RestoredReverb", state_file=str(state_file))
    run = topo_launch(_program(tmp_path / "b.yaml", restored), "threads", ready_timeout=120)
    user = run.handle("user", timeout=60)
    assert user.sizes() == {"uniform": counted, "queue": counted}
    assert user.take(counted) == list(range(counted))
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)


@pytest.mark.slow
def test_a_snapshot_lets_the_program_go_once_the_replay_has_copied_its_tables(
    topo_launch: Callable, tmp_path: Path
) -> None:
    """The snapshot's pause ends once Reverb has its copy of the tables, before the
    checkpoint is written (``capture_state``): a pacer inserting as fast as it can, let
    go then, must not reach the saved tables, whose size is the pacer's saved count."""
    import pickle

    path = tmp_path / "paced.yaml"
    path.write_text(
        textwrap.dedent("""
        name: paced
        nodes:
          replay: {kind: reverb, tables: "reverb_nodes:make_state_tables"}
          pacer:
            target: "reverb_nodes:SavingPacer"
            args: {replay: "@replay"}
        """)
    )
    run = topo_launch(path, "procs", ready_timeout=120)
    pacer = run.handle("pacer", timeout=60)
    wait_until(lambda: pacer.count() >= 200, 60, what="200 pacer steps")
    snaps = [run.snapshot() for _ in range(3)]
    assert run.stop(timeout=60) == 0
    assert not wait_gone(run.pids(), 15)

    for snap in snaps:
        counted = pickle.loads(snap.state("pacer"))
        state_file = tmp_path / f"replay-{snap.number}.state"
        state_file.write_bytes(pickle.loads(snap.state("replay")))
        restored = _replay("reverb_nodes:RestoredReverb", state_file=str(state_file))
        program = _program(tmp_path / f"b{snap.number}.yaml", restored)
        again = topo_launch(program, "threads", ready_timeout=120)
        assert again.handle("user", timeout=60).sizes() == {"uniform": counted, "queue": counted}
        assert again.stop(timeout=60) == 0
        assert not wait_gone(again.pids(), 15)


@pytest.mark.slow
def test_a_state_with_a_table_the_node_does_not_make_fails_the_node_clearly(
    topo_launch: Callable, tmp_path: Path
) -> None:
    run = topo_launch(
        _program(tmp_path / "a.yaml", _replay("topo.nodes.reverb:ReverbServer")),
        "threads",
        ready_timeout=120,
    )
    run.handle("user", timeout=60).insert([1, 2])
    state = run.handle("replay", timeout=60).save()
    assert run.stop(timeout=60) == 0
    state_file = tmp_path / "replay.state"
    state_file.write_bytes(state)
    path = tmp_path / "bad.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: bad
        nodes:
          replay:
            target: "reverb_nodes:RestoredReverb"
            args: {{tables: "reverb_nodes:make_tables", state_file: "{state_file}"}}
        """)
    )
    run = topo_launch(path, "threads")
    assert run.wait(120) == 1
    assert run.failure is not None and run.failure.node == "replay"
    assert "could not load the tables of its saved state" in run.failure.traceback
    assert "'queue'" in run.failure.traceback
