"""Fixtures: a real registry, real child processes, and a pid check that they are gone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
if str(ROOT) not in sys.path:  # the editable install may expose topo as a namespace package
    sys.path.insert(0, str(ROOT))

from rt_support import Spawn, assert_gone  # noqa: E402

from topo.runtime import (  # noqa: E402
    ProgramContext,
    RegistryServer,
    connect_program,
    new_program_id,
    new_secret,
)


@pytest.fixture
def registry() -> Iterator[RegistryServer]:
    reg = RegistryServer(new_program_id(), new_secret(), default_deadline=30.0)
    yield reg
    reg.close()


@pytest.fixture
def program(registry: RegistryServer) -> Iterator[ProgramContext]:
    prog = connect_program(registry.info)
    yield prog
    prog.address_book.close()


@pytest.fixture
def spawn(registry: RegistryServer) -> Iterator[Spawn]:
    procs: list[subprocess.Popen[bytes]] = []

    def start(node_id: str, cls: str = "Echo", **extra: Any) -> subprocess.Popen[bytes]:
        spec = {
            "info": asdict(extra.pop("info", registry.info)),
            "node_id": node_id,
            "cls": cls,
            **extra,
        }
        env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{HERE}")
        proc = subprocess.Popen(
            [sys.executable, str(HERE / "node_main.py"), json.dumps(spec)], env=env, cwd=str(ROOT)
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        assert_gone(proc.pid)
