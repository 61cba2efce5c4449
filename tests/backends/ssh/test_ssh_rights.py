"""Least privilege across the ssh test hosts (CURVE between hosts): a node reaches only
the nodes it was wired to and those whose handles it was passed in a call."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.backends.ssh.testhosts import HostSet
from topo.runtime import PermissionDenied

pytestmark = pytest.mark.slow
NODES = "tests.backends.rights_nodes"


def test_an_unwired_call_across_hosts_is_refused(
    ssh_hosts: HostSet, topo_launch: Callable, tmp_path: Path
) -> None:
    labels = {"topo-h1": {"labels": ["edge"]}, "topo-h3": {"labels": ["core"]}}
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml", hosts=labels)
    path = tmp_path / "rights.yaml"
    path.write_text(
        textwrap.dedent(f"""
        name: rights
        nodes:
          learner: {{target: "{NODES}:Learner", resources: {{host_labels: [core]}}}}
          actor: {{target: "{NODES}:Actor", args: {{learner: "@learner"}}}}
          broker: {{target: "{NODES}:Broker", args: {{learner: "@learner", rogue: "@rogue"}}}}
          rogue: {{target: "{NODES}:Rogue", resources: {{host_labels: [edge]}}}}
        """)
    )
    run = topo_launch(path, "ssh", backend_options={"hosts": hosts}, ready_timeout=60)
    where = {e.id: run.launcher.location(e.id) for e in run.program.executables}
    assert (where["learner"], where["rogue"]) == ("topo-h3", "topo-h1"), where
    learner = run.handle("learner", timeout=30)
    rogue = run.handle("rogue", timeout=30)
    assert run.handle("actor", timeout=30).step() == "learner"
    with pytest.raises(PermissionDenied) as denied:
        rogue.reach("learner")
    assert (denied.value.caller, denied.value.callee) == ("rogue", "learner")
    text, took = rogue.reach_timed("learner")
    assert text.startswith("denied: ") and took < 5, (text, took)
    assert rogue.holds() == {"secret": "", "authority": False, "serves": ["rogue"], "calls": []}
    before = learner.refusals()
    trace = tmp_path / "unpickled"
    assert rogue.forge("learner", "0" * 64, str(trace)).startswith("denied: ")
    assert learner.refusals() > before and not trace.exists()
    assert "refused to register 'learner'" in rogue.hijack("learner")
    assert learner.restores() == 0
    assert run.handle("broker", timeout=30).introduce()
    assert rogue.use_given() == "restored"
    assert run.stop(timeout=60) == 0
