"""``resources: {memory: 4GiB}``: parsed to bytes in the IR, written back by the exporter,
and a clear positioned error (exit 1 from the CLI) for a value that is not a size."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from topo.export import export_program
from topo.vocab import format_size, parse_size

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("written", "size", "shown"),
    [
        ("4GiB", 4 * 2**30, "4 GiB"),
        ("512 MiB", 512 * 2**20, "512 MiB"),
        ("1.5GiB", 3 * 2**29, "1.5 GiB"),
        ("300MB", 300 * 10**6, "300 MB"),
        ("2g", 2 * 10**9, "2 GB"),
        (1048576, 2**20, "1 MiB"),
    ],
)
def test_sizes_compile_to_bytes(compile_text: Any, written: object, size: int, shown: str) -> None:
    program = compile_text(f"""
        name: t
        nodes:
          a: {{target: "m:C", resources: {{memory: {written}}}}}
          b: {{target: "m:C"}}
    """)
    assert program.group_index["a"].resources.memory == size
    assert program.group_index["b"].resources.memory is None
    assert format_size(size) == shown and parse_size(shown) == size


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("lots", "'lots' is not a size"),
        ("4 GiBs", "'4 GiBs' is not a size"),
        ("-1GiB", "'-1GiB' is not a size"),
        ("0", "a size must be more than 0 bytes"),
        ("true", "memory"),
        ("[4]", "memory"),
    ],
)
def test_a_bad_memory_value_is_a_positioned_error(errors_of: Any, value: str, message: str) -> None:
    f = errors_of(f"""
        name: t
        nodes:
          a:
            target: m:C
            resources: {{memory: {value}}}
    """)
    assert message in f.headline and "group 'a'" in f.headline
    assert f.where()[1] == 5


def test_the_cli_says_it_and_exits_1(write_topo: Any) -> None:
    path = write_topo("""
        name: t
        nodes:
          a:
            target: m:C
            resources: {memory: lots}
    """)
    for command in (["validate"], ["run", "-b", "procs"]):
        done = subprocess.run(
            [sys.executable, "-c", "from topo.cli import main; main()", *command, str(path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            timeout=120,
        )
        assert done.returncode == 1, done.stderr
        assert "topology.yaml:5:" in done.stderr and "'lots' is not a size" in done.stderr
        assert "Traceback" not in done.stderr + done.stdout


def test_the_exporter_writes_the_limit_back(compile_text: Any, write_topo: Any) -> None:
    program = compile_text("""
        name: t
        nodes:
          a: {target: "m:C", resources: {memory: 1.5GiB}}
    """)
    text = export_program(program, schema="x.json").text
    assert "memory: 1.5GiB" in text
    again = compile_text(text)
    assert again.group_index["a"].resources.memory == 3 * 2**29
