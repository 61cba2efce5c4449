"""Which accelerators a node's process may open (``topo.backends.devices``): CPU-only
unless its group asks for accelerators, said in its environment and in JAX's config
before anything opens a device -- also where the fork server imported JAX first; the
default turned off per group; what a group may ask, checked where it is in the file."""

from __future__ import annotations

import importlib.util
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from topo.api import load
from topo.backends.devices import CPU_ONLY_ENV, platform_env
from topo.diagnostics import TopoError
from topo.ir import Accelerators, Resources

needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None, reason="needs jax")


def test_a_process_that_asks_for_nothing_is_cpu_only() -> None:
    assert platform_env([Resources()]) == CPU_ONLY_ENV
    assert platform_env([Resources(), Resources(env={"X": "1"})]) == CPU_ONLY_ENV  # type: ignore[arg-type]


def test_a_process_that_asks_gets_its_kind_first_and_its_devices_only() -> None:
    gpu = Resources(accelerators=Accelerators("gpu", 2, (1, 3)))
    assert platform_env([gpu]) == {"JAX_PLATFORMS": "cuda,cpu", "CUDA_VISIBLE_DEVICES": "1,3"}
    assert platform_env([gpu], assigned=(0,))["CUDA_VISIBLE_DEVICES"] == "0"
    assert "CUDA_VISIBLE_DEVICES" not in platform_env(
        [Resources(accelerators=Accelerators("gpu"))]
    )  # none named, none placed: every GPU of the host
    assert platform_env([Resources(gpus=(2,))])["CUDA_VISIBLE_DEVICES"] == "2"
    tpu = platform_env([Resources(accelerators=Accelerators("tpu", 1, (1,)))])
    assert tpu["JAX_PLATFORMS"] == "tpu,cpu" and tpu["TPU_VISIBLE_CHIPS"] == "1"
    # colocated with a CPU-only group, the process gets what one of them asks
    assert platform_env([Resources(), gpu])["JAX_PLATFORMS"] == "cuda,cpu"


def test_cpu_only_false_leaves_the_machine_as_it_is() -> None:
    assert platform_env([Resources(cpu_only=False)]) == {}
    assert platform_env([Resources(cpu_only=True, gpus=(0,))]) == CPU_ONLY_ENV


def _file(tmp_path: Path, resources: str) -> Path:
    path = tmp_path / "devices.yaml"
    path.write_text(
        'name: devices\nnodes:\n  learner: {target: "m:L", resources: ' + resources + "}\n"
    )
    return path


def test_the_file_asks_for_accelerators_and_turns_the_default_off(tmp_path: Path) -> None:
    program = load(_file(tmp_path, "{accelerators: {kind: tpu}}")).program
    assert program.group_index["learner"].resources.accelerators == Accelerators("tpu", 1)
    program = load(_file(tmp_path, "{accelerators: {kind: gpu, ids: [0, 1]}}")).program
    assert program.group_index["learner"].resources.accelerators == Accelerators("gpu", 2, (0, 1))
    program = load(_file(tmp_path, "{cpu_only: false}")).program
    assert program.group_index["learner"].resources.sees_devices


@pytest.mark.parametrize(
    ("resources", "said"),
    [
        ("{accelerators: {kind: fpga}}", "one of 'gpu', 'tpu', 'auto' or 'none', got 'fpga'"),
        ("{accelerators: {kind: auto, ids: [0]}}", "kind auto names no kind of device"),
        ("{accelerators: {kind: gpu, ids: [-1]}}", "device indexes start at 0"),
        ("{accelerators: {kind: gpu, ids: [0, 0]}}", "a device is named twice"),
        ("{accelerators: {kind: gpu, count: 3, ids: [0]}}", "count 3 and ids [0] disagree"),
        ("{accelerators: {kind: tpu, shared: true}}", "cannot be shared"),
        ("{accelerators: {kind: gpu}, cpu_only: true}", "is not cpu_only"),
        ("{accelerators: {kind: gpu}, gpus: [0]}", "not both"),
        ("{accelerators: {kind: gpu, count: 0}}", "must be ≥ 1, got 0"),
    ],
)
def test_what_a_group_cannot_ask_is_said_where_it_is(
    tmp_path: Path, resources: str, said: str
) -> None:
    with pytest.raises(TopoError) as info:
        load(_file(tmp_path, resources))
    text = str(info.value)
    assert said in text and "devices.yaml:3:" in text, text


@needs_jax
def test_each_process_gets_its_platform_though_the_fork_server_imported_jax(
    topo_launch: Callable, topology: Callable, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")  # the machine's own setting
    monkeypatch.setenv("TOPO_ACCELERATORS", "gpu:1")  # (this machine has none: declared)
    monkeypatch.delenv("JAX_PLATFORMS", raising=False)
    path = topology(
        textwrap.dedent("""
        name: platforms
        nodes:
          actor: {target: "devices_nodes:Platform", count: 2}
          learner:
            target: "devices_nodes:Platform"
            resources: {accelerators: {kind: gpu, ids: [0]}}
          free:
            target: "devices_nodes:Platform"
            resources: {cpu_only: false}
        """)
    )
    run = topo_launch(path, "procs", ready_timeout=60)
    for actor in ("actor/0", "actor/1"):
        handle = run.handle(actor, timeout=30)
        assert handle.env() == {**CPU_ONLY_ENV, "TPU_VISIBLE_CHIPS": None, "config": "cpu"}
        assert handle.device() == "cpu"
    learner = run.handle("learner", timeout=30).env()
    assert learner["CUDA_VISIBLE_DEVICES"] == "0" and learner["config"] == "cuda,cpu"
    free = run.handle("free", timeout=30).env()  # as the machine is
    assert free["CUDA_VISIBLE_DEVICES"] == "7" and free["JAX_PLATFORMS"] is None
    assert free["config"] is None
    assert run.stop(timeout=60) == 0


def test_the_threads_backend_refuses_a_group_that_asks_for_accelerators(
    topo_launch: Callable, topology: Callable
) -> None:
    path = topology(
        'name: t\nnodes:\n  l: {target: "devices_nodes:Platform", '
        "resources: {accelerators: {kind: gpu}}}\n"
    )
    with pytest.raises(TopoError, match="accelerators"):
        topo_launch(path, "threads", ready_timeout=60)
