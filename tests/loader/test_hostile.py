"""Hostile topology files: each one hung the loader or ate gigabytes before it was bounded.

The files are checked in one subprocess (this file run as a script) under a memory cap
(RLIMIT_AS) with a time limit per file, so a regression fails here instead of hanging
or exhausting CI. Each must end in a TopoError naming the problem.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

MEMORY_BYTES = 1024 * 1024 * 1024
PER_FILE_S = 20.0  # generous: a loaded CI machine; the old code hung for good
LOADS = "(loads without error)"
GROUP = "name: t\nnodes:\n  a:\n    target: m.x:Y\n"


def _bomb() -> str:
    lines = ['  l0: &l0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"  l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    return GROUP + "    args:\n" + "\n".join("    " + line for line in lines) + "\n"


def _args(expr: str) -> str:
    return GROUP + f'    args: {{x: "${{{expr}}}"}}\n'


def make_cases(d: Path) -> dict[str, tuple[Path, str]]:
    """name -> (file to load, text the error must contain); writes the files into ``d``."""
    cases: dict[str, tuple[str, str]] = {
        "alias_bomb": (_bomb(), "expands to more than 50,000 YAML values"),
        "bomb_duplicate_key": (_bomb() + GROUP, "expands to more than 50,000 YAML values"),
        "many_values": (GROUP + "    args: {x: [" + "1," * 60_000 + "1]}\n", "more than 50,000"),
        "self_alias": (
            "name: t\nnodes: &r\n  a: {target: m.x:Y, args: {x: *r}}\n",
            "2:8: error: an alias refers to the mapping or list that contains it",
        ),
        "extends_fifo": ("extends: fifo\n" + GROUP, "not a regular file"),
        "extends_dev_zero": ("extends: /dev/zero\n" + GROUP, "not a regular file"),
        "extends_dev_full": ("extends: /dev/full\n" + GROUP, "not a regular file"),
        "extends_dir": ("extends: sub\n" + GROUP, "is a directory"),
        "extends_huge": ("extends: huge.yaml\n" + GROUP, "larger than 4 MiB"),
        "extends_20000": (f"extends: [{', '.join(['b.yaml'] * 20_000)}]\n{GROUP}", "at most 16"),
        "extends_chain": ("extends: c1.yaml\n" + GROUP, "more than 64 base files"),
        "extends_diamond": ("extends: [d0a.yaml, d0b.yaml]\n" + GROUP, LOADS),
        "count_1e9": (GROUP + "    count: 1000000000\n", "more than the limit of 100,000"),
        "count_9_4096": (GROUP + '    count: "${9**4096}"\n', "more than 10,000 bits"),
        "round_ndigits": (_args("round(1, -10**100)"), "at most 1000 digits"),
        "nested_pow": (_args("(10**4096)**4096"), "more than 10,000 bits"),
        "str_of_nested": (_args("str([[1]*1000000]*1000000)"), "longer than 1,000,000"),
        "nested_repeat": (_args("[[0]*100000]*100000"), "longer than 1,000,000"),
        "percent_format": (_args("'%0999999999d' % 1"), "formatting of strings"),
        "long_sum": (_args("+".join(["1"] * 3000)), "nested"),
        "many_nots": (_args("not " * 1000 + "1"), "nested"),
        "many_minus": (_args("-" * 50_000 + "1"), "nested"),
    }  # fmt: skip
    out = {}
    for name, (text, expect) in cases.items():
        path = d / f"{name}.yaml"
        path.write_text(text)
        out[name] = (path, expect)
    os.mkfifo(d / "fifo")
    (d / "sub").mkdir()
    with open(d / "huge.yaml", "wb") as fh:  # sparse: no disk used
        fh.truncate(5 * 1024 * 1024)
    (d / "b.yaml").write_text("params: {p: 1}\n")
    for i in range(30):  # each level extends both files of the next: 2**30 paths, 60 files
        for s in "ab":
            bases = f"extends: [d{i + 1}a.yaml, d{i + 1}b.yaml]\n" if i < 29 else ""
            (d / f"d{i}{s}.yaml").write_text(f"{bases}params: {{p{i}{s}: 1}}\n")
    for i in range(1, 80):
        (d / f"c{i}.yaml").write_text(f"extends: c{i + 1}.yaml\n" if i < 79 else "params: {}\n")
    out["main_dev_zero"] = (Path("/dev/zero"), "larger than 4 MiB")
    return out


class _Timeout(BaseException):
    pass


def run_cases(d: Path) -> None:
    """Load every case, printing one JSON line per case (as it finishes)."""
    from topo.compile import compile_spec
    from topo.diagnostics import TopoError
    from topo.loader import load_spec

    def alarm(_sig: int, _frame: Any) -> None:
        raise _Timeout

    signal.signal(signal.SIGALRM, alarm)
    for name, (path, expect) in make_cases(d).items():
        print(json.dumps({"start": name}), flush=True)
        t0 = time.monotonic()
        signal.setitimer(signal.ITIMER_REAL, PER_FILE_S)
        try:
            compile_spec(load_spec(path))
            outcome = "ok" if expect == LOADS else "loaded without error"
        except TopoError as exc:
            outcome = "ok" if expect in str(exc) else f"wrong error: {str(exc)[:300]}"
        except _Timeout:
            outcome = f"took more than {PER_FILE_S} s"
        except BaseException as exc:  # reported to the test
            outcome = f"{type(exc).__name__}: {str(exc)[:300]}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        secs = time.monotonic() - t0
        print(json.dumps({"name": name, "outcome": outcome, "s": round(secs, 2)}), flush=True)


def _limit_memory() -> None:
    """Cap this worker's address space (set by the worker itself: a preexec_fn is unsafe
    in the multithreaded test process)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    d = tmp_path_factory.mktemp("hostile")
    env = {k: v for k, v in os.environ.items() if k != "TOPO_MAX_NODES"}
    proc = subprocess.run(
        [sys.executable, __file__, str(d)], capture_output=True, text=True, timeout=180,
        env=env,
    )  # fmt: skip
    out: dict[str, dict[str, Any]] = {}
    last = None
    for line in proc.stdout.splitlines():
        item = json.loads(line)
        if "start" in item:
            last = item["start"]
        else:
            out[item["name"]] = item
    if proc.returncode != 0:
        out.setdefault(str(last), {"outcome": f"worker died: {proc.stderr[-2000:]}"})
    return out


CASES = """
alias_bomb bomb_duplicate_key many_values self_alias extends_fifo extends_dev_zero extends_dev_full
extends_dir extends_huge
extends_20000 extends_chain extends_diamond count_1e9 count_9_4096 round_ndigits nested_pow
str_of_nested nested_repeat percent_format long_sum many_nots many_minus main_dev_zero
""".split()


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_hostile_file_fails_fast_with_a_message(
    case: str, results: dict[str, dict[str, Any]]
) -> None:
    assert case in results, f"never finished (last started case crashed the worker): {results}"
    assert results[case]["outcome"] == "ok", results[case]
    assert results[case]["s"] < PER_FILE_S


if __name__ == "__main__":
    _limit_memory()
    run_cases(Path(sys.argv[1]))
