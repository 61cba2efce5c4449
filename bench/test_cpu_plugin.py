"""A pytest plugin: the CPU of each test, every process it started included, read from the
cpuacct cgroup (v1) this pytest runs in; one JSON line per test to ``CGPLUG_OUT``.
Used by bench/test_cpu.sh; the cgroup must hold nothing but this pytest and its children."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Generator
from typing import Any

import pytest


def _usage_path() -> str:
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.strip().split(":", 2)
            if "cpuacct" in controllers.split(","):
                return f"/sys/fs/cgroup/cpuacct{path}/cpuacct.usage"
    raise RuntimeError("no cpuacct cgroup (cgroup v1) for this process")


USAGE = _usage_path()
OUT = os.environ.get("CGPLUG_OUT", "test-cpu.jsonl")


def _usage_ns() -> int:
    with open(USAGE) as f:
        return int(f.read())


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Generator[None, None, None]:
    before, start = _usage_ns(), time.monotonic()
    yield
    row = {"id": item.nodeid, "cpu": (_usage_ns() - before) / 1e9, "wall": time.monotonic() - start}
    with open(OUT, "a") as f:
        f.write(json.dumps(row) + "\n")
