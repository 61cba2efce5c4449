"""``--mermaid`` output through the real Mermaid parser (mermaid 10 on Node, with jsdom).

The npm packages are installed once into a cache directory outside the repository
(``$TOPO_MERMAID_CACHE`` or ``~/.cache/topo/mermaid-check``); the test skips, saying
why, where ``node``/``npm`` are absent or the npm registry cannot be reached.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from render_programs import SEEDS, acme_distributed, mava_dial
from test_dot import awkward_program

from topo.ir import Program
from topo.render import ViewOptions, build_view, to_mermaid

HERE = Path(__file__).parent / "mermaid_check"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "topologies"


def parser_dir() -> Path:
    """A directory with parse.mjs and its node_modules installed (or skip)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm not installed: the real Mermaid parser cannot run")
    spec = (HERE / "package.json").read_bytes() + (HERE / "parse.mjs").read_bytes()
    root = Path(os.environ.get("TOPO_MERMAID_CACHE", Path.home() / ".cache/topo/mermaid-check"))
    target = root / hashlib.sha256(spec).hexdigest()[:12]
    if not (target / "node_modules" / "mermaid").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        for name in ("package.json", "parse.mjs"):
            shutil.copy(HERE / name, target / name)
        try:
            done = subprocess.run(
                ["npm", "install", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=target,
                capture_output=True,
                timeout=240,
                check=False,
            )
        except subprocess.TimeoutExpired:
            pytest.skip("npm install of mermaid timed out (registry unreachable?)")
        if done.returncode != 0:
            pytest.skip(f"npm install of mermaid failed: {done.stderr.decode()[-300:]}")
    return target


def programs() -> dict[str, Program]:
    out = {name: make() for name, make in SEEDS.items()}
    out["acme_64"] = acme_distributed(num_actors=64, limiter=False)
    out["mava_64_16"] = mava_dial(num_executors=64, num_caches=16)
    out["awkward"] = awkward_program()
    if EXAMPLES.is_dir():
        from topo.cli.common import load_program

        for f in sorted(EXAMPLES.glob("*.yaml")):
            out[f"example_{f.stem}"] = load_program(f, [])
    return out


@pytest.mark.slow
def test_real_mermaid_parser_accepts_every_picture(tmp_path: Path) -> None:
    where = parser_dir()
    files = []
    for name, program in programs().items():
        for mode, opts in {
            "collapsed": ViewOptions(),
            "expanded": ViewOptions(expand=True),
            "disabled": ViewOptions(show_disabled=True),
        }.items():
            path = tmp_path / f"{name}.{mode}.mmd"
            path.write_text(to_mermaid(build_view(program, opts)))
            files.append(str(path))
    done = subprocess.run(
        ["node", "parse.mjs", *files], cwd=where, capture_output=True, timeout=120, check=False
    )
    report = done.stdout.decode()
    assert done.returncode == 0, report + done.stderr.decode()
    assert report.count("ok ") == len(files)


def test_real_mermaid_parser_rejects_broken_text(tmp_path: Path) -> None:
    # guards the test above: the parser really checks syntax
    where = parser_dir()
    bad = tmp_path / "bad.mmd"
    bad.write_text('flowchart LR\n  n_a("a"]\n')
    done = subprocess.run(
        ["node", "parse.mjs", str(bad)], cwd=where, capture_output=True, timeout=60, check=False
    )
    assert done.returncode == 1 and "FAIL" in done.stdout.decode()
