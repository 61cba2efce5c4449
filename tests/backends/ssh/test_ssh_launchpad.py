"""A Launchpad script under absl on the ssh backend prints no ssh chatter (a Launchpad
program on every backend, pickled constructors included: the conformance suite)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.backends.ssh.testhosts import HostSet

pytestmark = pytest.mark.slow


SCRIPT = '''
"""A Launchpad script under absl's app.run (which shows INFO logs) on the ssh backend."""
from absl import app
import topo.launchpad as lp


def main(_):
    program = lp.Program("absl_on_ssh")
    program.add_node(lp.PyNode(print, "HELLO FROM A HOST"), label="hello")
    lp.launch(program, launch_type="local_mp").wait()


if __name__ == "__main__":
    app.run(main)
'''


def test_a_launchpad_script_on_hosts_prints_no_ssh_chatter(
    ssh_hosts: HostSet, tmp_path: Path
) -> None:
    """absl's app.run shows INFO logs; asyncssh's per-channel INFO lines stay out."""
    hosts = ssh_hosts.inventory(tmp_path / "hosts.yaml")
    script = tmp_path / "launch.py"
    script.write_text(SCRIPT)
    root = Path(__file__).resolve().parents[3]
    done = subprocess.run(
        [sys.executable, str(script), "--topo_backend=ssh", f"--topo_hosts={hosts}"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=str(root)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "HELLO FROM A HOST" in done.stdout + done.stderr
    chatter = [line for line in done.stderr.splitlines() if "[conn=" in line]
    assert not chatter, chatter[:5]
