"""What ``topo run -b ray`` prints into a pipe: plain text, without the colour codes Ray
puts around its own notes (such as "(raylet) A worker died ...") on a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.backends.ray.cluster import ray_missing
from tests.backends.ray.runs import NODES, kill_if_running, start, topo_run, write

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(ray_missing() is not None, reason=str(ray_missing())),
]


def test_piped_output_has_no_colour_codes(tmp_path: Path) -> None:
    path = write(
        tmp_path / "dies.yaml",
        f"""
        name: dies
        nodes:
          d:
            target: "{NODES}:Dies"
            restart: {{policy: on-failure, max_restarts: 1, backoff: {{initial_s: 0.1}}}}
        """,
    )
    proc = start(topo_run(path, tmp_path / "run"))
    try:
        out, _ = proc.communicate(timeout=240)
    finally:
        kill_if_running(proc)
    assert proc.returncode == 1, out
    assert "node d failed 2 times" in out, out  # it died, restarted and died again
    assert "\x1b[" not in out, out
