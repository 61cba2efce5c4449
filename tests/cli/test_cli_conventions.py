"""The ``topo`` command follows the usual conventions (``--version``, ``-h``, completion,
``python -m topo``), and the package ships what a user needs (schema, LICENSE)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import topo
from topo.cli.schema import installed_schema
from topo.loader.schema import schema_text

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ["validate", "plan", "schema", "graph", "run", "plot"]


def _run(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "topo", *argv],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env=env or dict(os.environ, PYTHONPATH=str(ROOT)),
    )


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version(flag: str) -> None:
    result = _run(flag)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"topo {topo.__version__}"


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_short_and_long_help_on_every_command(command: str | None) -> None:
    argv = [command] if command else []
    short, long = _run(*argv, "-h"), _run(*argv, "--help")
    assert short.returncode == 0 == long.returncode, short.stderr
    assert "Usage: topo" in short.stdout and short.stdout == long.stdout


def test_python_dash_m_topo_runs_the_command() -> None:
    result = _run("validate", "examples/topologies/consumer_producers.yaml")
    assert result.returncode == 0, result.stderr
    assert "consumer_producers" in result.stdout


def test_shell_completion_is_offered_and_completes_commands() -> None:
    shown = _run("--show-completion", "bash")
    assert shown.returncode == 0, shown.stderr
    assert "_topo_completion" in shown.stdout
    assert "--install-completion" in _run("--help").stdout
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        _TOPO_COMPLETE="complete_bash",
        COMP_WORDS="topo va",
        COMP_CWORD="1",
    )
    completed = subprocess.run(
        [sys.executable, "-c", "from topo.cli import main; main()"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
    )
    assert "validate" in completed.stdout.split(), completed.stdout + completed.stderr


# --- the schema and the package ------------------------------------------------------------


def test_the_schema_file_is_the_generated_schema() -> None:
    # One file, schemas/topology.schema.json: the examples' $schema lines point at it and
    # the package ships it (topo/schema/ holds a link to it, copied into the wheel).
    assert (ROOT / "schemas/topology.schema.json").read_text(encoding="utf-8") == (schema_text()), (
        "schemas/topology.schema.json is stale; regenerate it with "
        "`.venv/bin/topo schema -o schemas/topology.schema.json` and commit it"
    )
    package_copy = ROOT / "topo/schema/topology.schema.json"
    assert package_copy.is_symlink(), "one schema file: topo/schema/ links to schemas/"
    assert package_copy.resolve() == (ROOT / "schemas/topology.schema.json").resolve()


def test_schema_path_and_uri_point_at_the_installed_file() -> None:
    path = _run("schema", "--path")
    assert path.returncode == 0, path.stderr
    shipped = Path(path.stdout.strip())
    assert shipped == installed_schema() and shipped.is_absolute()
    assert shipped.read_text(encoding="utf-8") == schema_text()
    uri = _run("schema", "--uri")
    assert uri.stdout.strip() == shipped.as_uri()


def test_the_wheel_ships_the_schema_and_the_license(tmp_path: Path) -> None:
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    if uv is not None:
        cmd = [uv, "build", "--wheel", "-q", "-o", str(tmp_path), str(ROOT)]
    else:
        cmd = [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path),
            str(ROOT),
        ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = tmp_path.glob("*.whl")
    assert wheel.name.startswith("topo_launch-")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert zf.read("topo/schema/topology.schema.json").decode() == schema_text()
        (license_name,) = [n for n in names if n.endswith("/LICENSE")]
        assert b"Apache License" in zf.read(license_name)
        metadata = zf.read(next(n for n in names if n.endswith(".dist-info/METADATA")))
        eps = zf.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
    assert b"Name: topo-launch" in metadata
    # the built-in node kinds are registered through the entry points, like plug-ins
    assert b"[topo.kinds]\ncacher = topo.kinds.builtin:CACHER\n" in eps
    assert b"courier = topo.kinds.builtin:COURIER\n" in eps
    assert b"topo developers" in metadata and b"Classifier:" in metadata
    assert any(n == "topo/__main__.py" for n in names)
