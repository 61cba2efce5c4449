"""On ssh hosts the accelerators an inventory declares go to the groups that ask, each
device to one process: the learners run on the hosts that have GPUs, each told its own,
and the actors are told of none (the test hosts have no GPU: the inventory declares
some, and the processes' environment is what is checked)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.ssh.testhosts import HostSet

pytestmark = pytest.mark.slow


def test_learners_get_the_declared_gpus_of_their_hosts_one_each(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    first, second, third = ssh_hosts.names[:3]
    hosts = ssh_hosts.inventory(
        tmp_path / "hosts.yaml",
        hosts={first: {"accelerators": {"gpu": 2}}, second: {"accelerators": {"gpu": 1}}},
    )
    path = tmp_path / "devices.yaml"
    path.write_text(
        textwrap.dedent(
            """
            name: devices
            nodes:
              learner:
                target: "tests.backends.ssh.ssh_nodes:Where"
                count: 3
                resources: {accelerators: {kind: gpu}}
              actor: {target: "tests.backends.ssh.ssh_nodes:Where", count: 3}
            """
        )
    )
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=60)
    held = []
    for i in range(3):
        learner = run.handle(f"learner/{i}", timeout=30)
        told = learner.devices()
        assert told["JAX_PLATFORMS"] == "cuda,cpu", told
        held.append((learner.where()["host"], told["CUDA_VISIBLE_DEVICES"]))
    assert sorted(held) == sorted([(first, "0"), (first, "1"), (second, "0")])
    for i in range(3):
        told = run.handle(f"actor/{i}", timeout=30).devices()
        assert told == {"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu"}, told
    assert third not in {h for h, _ in held}
    assert run.stop(timeout=60) == 0
