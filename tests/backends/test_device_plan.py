"""Which accelerators of its host each executable gets (``topo.backends.device_plan``):
counts and named devices given out without two executables on one device unless their
group shares; what cannot be served refused at the group's line, before anything starts;
this machine's devices found in /dev or declared; on procs each process sees its own.
This machine has no accelerator: the procs runs declare some (``TOPO_ACCELERATORS``, as
a user does where a container hides them) and check what each process was told."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.ssh.inventories import made_up
from tests.conftest import CompileText
from topo.backends.device_plan import (
    LOCAL,
    Assigned,
    assign,
    format_assignment,
    local_accelerators,
    parse_accelerators,
)
from topo.backends.devices import CPU_ONLY_ENV, platform_env
from topo.backends.ssh.backend import SshBackend
from topo.backends.ssh.backend import host_devices as ssh_devices
from topo.backends.ssh.inventory import Inventory, load_inventory
from topo.backends.ssh.placement import place
from topo.diagnostics import TopoError

ROOT = Path(__file__).resolve().parents[2]
TWO_LEARNERS = """
name: devices
nodes:
  learner:
    target: "devices_nodes:Platform"
    count: 2
    resources: {accelerators: {kind: gpu}}
  actor: {target: "devices_nodes:Platform", count: 2}
"""


def _local(program: object, offered: dict[str, int], **kw: object) -> dict[str, Assigned]:
    host_of = {e.id: LOCAL for e in program.executables}  # type: ignore[attr-defined]
    return assign(program, host_of, {LOCAL: offered}, **kw)  # type: ignore[arg-type]


def test_counts_get_free_devices_and_named_ones_exactly_theirs(compile_text: CompileText) -> None:
    program = compile_text(
        """
        name: d
        nodes:
          learner: {target: "m:L", count: 2, resources: {accelerators: {kind: gpu}}}
          pinned: {target: "m:P", resources: {accelerators: {kind: gpu, ids: [0]}}}
          big: {target: "m:B", resources: {accelerators: {kind: gpu, count: 2}}}
          actor: {target: "m:A", count: 3}
        """
    )
    got = _local(program, {"gpu": 5})
    assert got["pinned"] == Assigned("gpu", (0,))  # named devices are served first
    assert got["learner/0"] == Assigned("gpu", (1,)) and got["learner/1"] == Assigned("gpu", (2,))
    assert got["big"] == Assigned("gpu", (3, 4))
    assert not any(e.startswith("actor") for e in got)  # asks for none: gets none
    text = format_assignment(program, got)
    assert "learner/0 → gpu 1" in text and "big → gpu 3,4" in text


def test_a_shared_group_s_replicas_get_the_same_devices(compile_text: CompileText) -> None:
    program = compile_text(
        """
        name: d
        nodes:
          actor: {target: "m:A", count: 3, resources: {accelerators: {kind: gpu, shared: true}}}
          learner: {target: "m:L", resources: {accelerators: {kind: gpu}}}
        """
    )
    got = _local(program, {"gpu": 2})
    assert {got[f"actor/{i}"] for i in range(3)} == {Assigned("gpu", (0,))}
    assert got["learner"] == Assigned("gpu", (1,))


@pytest.mark.parametrize(
    ("asks", "offered", "said"),
    [
        ("{kind: tpu}", {"gpu": 1}, "this machine has no tpu (its accelerators: gpu ×1)"),
        ("{kind: gpu}", {}, "this machine has no gpu (its accelerators: none)"),
        ("{kind: gpu, count: 3}", {"gpu": 2}, "has 2 gpu(s), fewer than the 3 asked"),
        ("{kind: gpu, ids: [2]}", {"gpu": 2}, "gpu 2 is out of range on this machine: it has 2"),
    ],
)
def test_what_the_machine_cannot_serve_is_refused_at_the_group(
    compile_text: CompileText, asks: str, offered: dict, said: str
) -> None:
    learner = f'{{target: "m:L", resources: {{accelerators: {asks}}}}}'
    program = compile_text(f'name: d\nnodes:\n  a: {{target: "m:A"}}\n  learner: {learner}\n')
    with pytest.raises(TopoError) as info:
        _local(program, offered)
    [diagnostic] = info.value.diagnostics
    assert said in diagnostic.message, diagnostic.message
    assert diagnostic.pos is not None and diagnostic.pos.line == 4  # the group's line
    assert diagnostic.hint


def test_auto_takes_a_free_device_of_the_host_or_runs_on_the_cpu(
    compile_text: CompileText,
) -> None:
    text = """
        name: d
        nodes:
          learner: {target: "m:L", count: 2, resources: {accelerators: {kind: auto}}}
          actor: {target: "m:A", resources: {accelerators: {kind: none}}}
        """
    program = compile_text(text)
    assert program.group_index["actor"].resources.accelerators is None  # none: as if unsaid
    assert _local(program, {"tpu": 1}) == {"learner/0": Assigned("tpu", (0,))}  # 1: CPU
    assert _local(program, {"gpu": 2, "tpu": 1}) == {
        "learner/0": Assigned("gpu", (0,)),
        "learner/1": Assigned("gpu", (1,)),
    }
    assert _local(program, {}) == {}  # no accelerator here: both on the CPU, no error
    learner = program.group_index["learner"].resources
    assert platform_env([learner]) == CPU_ONLY_ENV  # given none: CPU only
    assert platform_env([learner], Assigned("tpu", (0,)))["JAX_PLATFORMS"] == "tpu,cpu"


def test_two_executables_never_get_one_device(compile_text: CompileText) -> None:
    program = compile_text(
        """
        name: d
        nodes:
          learner: {target: "m:L", count: 3, resources: {accelerators: {kind: gpu}}}
          pinned: {target: "m:P", resources: {accelerators: {kind: gpu, ids: [1]}}}
        """
    )
    with pytest.raises(TopoError) as info:
        _local(program, {"gpu": 3})
    [diagnostic] = info.value.diagnostics  # one per group, not one per replica
    assert "group 'learner' asks for 1 gpu(s) per process" in diagnostic.message
    assert "the 3 gpu(s) of this machine are taken (by learner/0, learner/1, pinned)" in (
        diagnostic.message
    )
    program = compile_text(
        """
        name: d
        nodes:
          first: {target: "m:L", resources: {accelerators: {kind: gpu, ids: [0]}}}
          second: {target: "m:P", resources: {accelerators: {kind: gpu, ids: [0]}}}
        """
    )
    with pytest.raises(TopoError, match="gpu 0 of this machine is already first's"):
        _local(program, {"gpu": 1})


def test_a_changed_program_keeps_the_running_executables_devices(
    compile_text: CompileText,
) -> None:
    program = compile_text(
        """
        name: d
        nodes:
          learner: {target: "m:L", count: 2, resources: {accelerators: {kind: gpu}}}
        """
    )
    kept = {"learner/0": Assigned("gpu", (2,))}  # what it got before the change
    got = _local(program, {"gpu": 3}, kept=kept)
    assert got == {"learner/0": Assigned("gpu", (2,)), "learner/1": Assigned("gpu", (0,))}


def test_this_machine_s_devices_are_found_in_dev_or_declared(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TOPO_ACCELERATORS", raising=False)
    dev = tmp_path / "dev"
    (dev / "vfio").mkdir(parents=True)
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "vfio/0", "vfio/vfio"):
        (dev / name).touch()
    assert local_accelerators(dev) == {"gpu": 2, "tpu": 1}
    (dev / "accel0").touch()
    (dev / "accel1").touch()
    assert local_accelerators(dev)["tpu"] == 2  # /dev/accel* where there is one
    assert local_accelerators(tmp_path / "none") == {}
    monkeypatch.setenv("TOPO_ACCELERATORS", "tpu:4")
    assert local_accelerators(dev) == {"tpu": 4}  # declared: wins over what is found
    assert parse_accelerators("gpu:2, tpu:1") == {"gpu": 2, "tpu": 1}
    assert parse_accelerators("none") == {}
    with pytest.raises(ValueError, match="expected KIND:COUNT pairs"):
        parse_accelerators("gpus=2")


def test_on_procs_each_learner_sees_its_own_gpu_and_the_actors_none(
    topo_launch: Callable, topology: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TOPO_ACCELERATORS", "gpu:2")
    run = topo_launch(topology(TWO_LEARNERS), "procs", ready_timeout=60)
    seen = {run.handle(f"learner/{i}", timeout=30).env()["CUDA_VISIBLE_DEVICES"] for i in (0, 1)}
    assert seen == {"0", "1"}
    status = json.loads((run.run_dir / "status.json").read_text())  # what the views show
    devices = {n["id"]: n["device"] for n in status["nodes"]}
    assert sorted(devices.values(), key=str) == [None, None, "gpu 0", "gpu 1"]
    assert devices["actor/0"] is None and devices["learner/0"] in ("gpu 0", "gpu 1")
    assert {run.handle(f"actor/{i}", timeout=30).env()["CUDA_VISIBLE_DEVICES"] for i in (0, 1)} == {
        ""
    }
    assert run.stop(timeout=60) == 0


def test_an_oversubscribed_plan_is_refused_before_anything_starts(tmp_path: Path) -> None:
    path = tmp_path / "devices.yaml"
    path.write_text(
        textwrap.dedent(TWO_LEARNERS).replace("count: 2\n    resources", "count: 3\n    resources")
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": f"{ROOT}:{ROOT / 'tests' / 'backends'}",
        "TOPO_HOME": str(tmp_path / "home"),
        "TOPO_ACCELERATORS": "gpu:2",
        "NO_COLOR": "1",
    }

    def topo(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "topo", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    planned = topo("plan", str(path), "-b", "procs")
    assert planned.returncode == 1 and "Traceback" not in planned.stderr, planned.stderr
    assert "devices.yaml:4:3: error: group 'learner' asks for 1 gpu(s)" in planned.stderr
    ran = topo("run", str(path), "-b", "procs", "--no-live")
    assert ran.returncode == 1 and "Traceback" not in ran.stderr, ran.stderr
    assert "the 2 gpu(s) of this machine are taken" in ran.stderr
    assert not (tmp_path / "home" / "runs").exists() or not any(
        (tmp_path / "home" / "runs").iterdir()
    )  # nothing started, no run left
    env["TOPO_ACCELERATORS"] = "gpu:3"
    planned = topo("plan", str(path), "-b", "procs")
    assert planned.returncode == 0, planned.stderr
    assert "learner/2 → gpu 2" in planned.stdout


# --- on the hosts of an ssh inventory -------------------------------------------------


def _hosts(**accelerators: dict[str, int]) -> Inventory:
    """Hosts named by the keywords, each with those accelerators."""
    return made_up({name: {"accelerators": offered} for name, offered in accelerators.items()})


def test_ssh_places_the_learners_where_the_devices_are(compile_text: CompileText) -> None:
    program = compile_text(
        """
        name: d
        nodes:
          learner: {target: "m:L", count: 3, resources: {accelerators: {kind: gpu}}}
          actor: {target: "m:A", count: 4}
        """
    )
    hosts = _hosts(cpu1={}, gpu2={"gpu": 2}, gpu1={"gpu": 1})
    placement = place(program, hosts)
    on = {e: placement.host_of(e) for e in ("learner/0", "learner/1", "learner/2")}
    assert sorted(on.values()) == ["gpu1", "gpu2", "gpu2"]
    devices = ssh_devices(program, placement, hosts)
    held = {(on[e], devices[e].ids) for e in on}
    assert len(held) == 3  # never two learners on one device of one host
    text = SshBackend.placement_text(program, hosts=hosts)
    assert text is not None and "accelerators" in text and "learner/0 → gpu" in text


def test_ssh_refuses_more_learners_than_the_hosts_have_devices(
    compile_text: CompileText,
) -> None:
    program = compile_text(
        """
        name: d
        nodes:
          learner: {target: "m:L", count: 3, resources: {accelerators: {kind: gpu}}}
        """
    )
    with pytest.raises(TopoError) as info:
        place(program, _hosts(a={"gpu": 1}, b={"gpu": 1}, c={}))
    [diagnostic] = info.value.diagnostics
    assert "needs 1 gpu(s) on one host, and no host it may use has them free" in (
        diagnostic.message
    )
    assert "a (gpu 0 of 1 free); b (gpu 0 of 1 free); c (no accelerators)" in diagnostic.message
    assert diagnostic.pos is not None and diagnostic.pos.line == 3


def test_an_inventory_declares_each_host_s_accelerators(tmp_path: Path) -> None:
    (tmp_path / "known_hosts").write_text("")
    path = tmp_path / "hosts.yaml"
    path.write_text(
        "defaults: {known_hosts: known_hosts}\n"
        "hosts:\n"
        "  big: {address: 10.0.0.1, accelerators: {gpu: 4, tpu: 0}}\n"
        "  small: {address: 10.0.0.2}\n"
    )
    loaded = load_inventory(path)
    assert loaded.host("big").accelerators == {"gpu": 4}
    assert loaded.host("small").accelerators == {}
    path.write_text(
        "defaults: {known_hosts: known_hosts}\n"
        "hosts:\n"
        "  big: {address: 10.0.0.1, accelerators: {fpga: 2}}\n"
    )
    with pytest.raises(TopoError) as info:
        load_inventory(path)
    text = str(info.value)
    assert "hosts.yaml:3:" in text and "fpga" in text, text


# --- what Ray and Slurm are asked for ---------------------------------------------------


def test_ray_and_slurm_are_asked_for_the_accelerators(compile_text: CompileText) -> None:
    from topo.backends.ray.placement import demand as ray_demand
    from topo.backends.ray.placement import own_actor
    from topo.backends.slurm.demand import demand as slurm_demand

    program = compile_text(
        """
        name: d
        nodes:
          learner: {target: "m:L", resources: {accelerators: {kind: gpu, count: 2}}}
          tpu: {target: "m:T", resources: {accelerators: {kind: tpu}}}
          actor: {target: "m:A", count: 4, resources: {accelerators: {kind: gpu, shared: true}}}
          cpu: {target: "m:C"}
        """
    )
    assert ray_demand(program, "learner")["GPU"] == 2.0
    assert ray_demand(program, "tpu")["TPU"] == 1.0 and "GPU" not in ray_demand(program, "tpu")
    assert ray_demand(program, "actor/0")["GPU"] == 0.25  # 4 replicas share one GPU
    assert own_actor(program, "tpu") and not own_actor(program, "cpu")
    assert slurm_demand(program, "learner").gpus == 2
    assert slurm_demand(program, "cpu").gpus == 0


def test_slurm_refuses_tpus_before_asking_slurm_anything(tmp_path: Path) -> None:
    path = tmp_path / "tpu.yaml"
    path.write_text(
        'name: d\nnodes:\n  a: {target: "m:A"}\n'
        '  learner: {target: "m:L", resources: {accelerators: {kind: tpu}}}\n'
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "NO_COLOR": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "topo", "plan", str(path), "-b", "slurm"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert "tpu.yaml:4:3: error: group 'learner' asks for TPUs" in done.stderr, done.stderr
