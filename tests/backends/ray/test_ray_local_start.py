"""The local Ray that ``topo run -b ray`` starts is tried again when its start fails (on
a busy machine Ray's raylet may not register within Ray's own 30 s), and what the
failed attempt started is ended first: checked by pid, in a process of its own.

The failure is made by letting Ray's ``Node`` start for real and then raising the error
Ray raises when it gives up on its raylet: the processes are real, only the verdict is
forced (a machine cannot be made slow on cue)."""

from __future__ import annotations

import json
import subprocess
import sys

import psutil
import pytest

from tests.backends.ray.cluster import ray_missing

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]

SCRIPT = r"""
import json, sys
import ray
from ray._private import node as ray_node
from topo.backends.ray.session import RaySession

real_init = ray_node.Node.__init__
failed = []

def init_once_failing(self, *args, **kwargs):
    real_init(self, *args, **kwargs)
    if not failed:
        failed.append(self.session_name)
        raise Exception("The current node timed out during startup. (forced by the test)")

ray_node.Node.__init__ = init_once_failing
session = RaySession(None, ship=False)
session.connect()
second = ray._private.worker._global_node.session_name
cpus = ray.cluster_resources().get("CPU", 0)
session.disconnect()
print(json.dumps({"failed": failed[0], "second": second, "cpus": cpus}), flush=True)
"""


def _of_session(name: str) -> list[int]:
    """The live processes of the Ray session ``name``, found by what names the session:
    their command line, or a file they hold open in its directory (Ray's agents retitle
    themselves). Only looked at, never killed by it."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        try:
            held = [f.path for f in proc.open_files()]
        except psutil.Error:
            held = []
        if any(name in arg for arg in [*(proc.info["cmdline"] or ()), *held]):
            found.append(proc.pid)
    return found


def test_a_local_ray_whose_start_fails_is_started_again_and_the_failed_one_ended() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "Ray did not start" in proc.stderr and "trying again (2/3)" in proc.stderr
    assert report["cpus"] > 0  # the second attempt's Ray answered
    assert report["failed"] != report["second"]
    # The failed attempt's processes, its raylet's agents too, were ended before the
    # second began; the second's by the session's end, before it returned.
    for name in (report["failed"], report["second"]):
        assert not _of_session(name), f"processes of Ray session {name} outlived it"
