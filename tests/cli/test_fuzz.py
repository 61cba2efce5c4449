"""Fuzzing ``topo validate`` with randomly mutated example topologies.

Unlike the corpus (tests/cli/test_cli_corpus.py), whose mutations are invalid by
construction, these mutations are blind: byte flips, deleted, duplicated and shifted
lines, renamed keys, swapped types, huge numbers, aliases, merge keys and tags, one to
three per file, from a fixed seed. A mutated file may still be valid; whatever it is,
``topo validate`` must end with exit 0, or exit 1 with a ``file:line:col: error:``
diagnostic, and never a traceback, within 2 s of CPU time and 1.5 GiB per file (CPU
time, not wall: on a busy machine a file may wait for a core without being slow).

The files run in worker subprocesses (this file run as a script) under RLIMIT_AS, with
a per-file alarm, so a hang or a memory blow-up fails the test instead of CI.
CI runs 2,400 files (about 30 s on 2 cores); for a longer run set ``TOPO_FUZZ_FILES``,
e.g. ``TOPO_FUZZ_FILES=20000 pytest tests/cli/test_fuzz.py``.
"""

from __future__ import annotations

import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples" / "topologies").glob("*.yaml"))
POSITION = re.compile(r"^(?P<file>\S+?):(?P<line>\d+):(?P<col>\d+): error: ", re.M)
PER_FILE_S = 2.0
MEMORY_BYTES = 1536 * 1024 * 1024
SEED = "topo-fuzz-1"

KEYS = [
    "name", "nodes", "params", "extends", "colocation", "stop", "kind", "target", "count",
    "enabled", "args", "overrides", "colocate", "restart", "resources", "rpc", "tables",
    "source", "refresh_ms", "stale_ms", "primary", "default", "type", "help", "policy",
    "max_restarts", "round_robin", "fallback", "threads", "xyzzy", "<<", "0", "", "'a b'",
]  # fmt: skip
VALUES = [
    "[]", "{}", "null", "~", "true", "no", "3.5", "-1", "0", '"text"', "[1, 2]", "{a: 1}",
    '"@nope"', '"@actor[0]"', "'${1/0}'", '"${nope}"', "|\n  block", ">", "-", "2024-01-01",
    "0o17", "0x1F", ".inf", ".nan", '"\\0"', "'\\x00'", "? a", ":", "@", "`x`", "%TAG",
]  # fmt: skip
HUGE = [
    "9" * 5000, "1e999", "-1e999", "0x" + "f" * 300, str(10**100), "100000000000",
    "1000000000", "2147483648", '"${10**4000}"', '"${9**9**9}"', '"${(10**300)**300}"',
    '"${[0]*10**6}"', '"${[[0]*1000]*1000}"', '"${str([[1]*1000]*1000)}"',
    '"${round(1, -10**9)}"', '"${1' + "+1" * 500 + '}"', '"${' + "-" * 2000 + '1}"',
    '"${' + "not " * 300 + '1}"', '"${' + "(" * 200 + "1" + ")" * 200 + '}"',
    "\"${'%099999999d' % 1}\"", '"${int(\'9\' * 5000)}"', '"${float(10**400)}"',
    '"${' + "[" * 150 + "]" * 150 + '}"',
]  # fmt: skip
TAGS = [
    "!!omap", "!!set", "!!python/object:os.system", "!!python/name:os.system",
    "!!python/tuple", "!!binary", "!!timestamp", "!!str", "!!int", "!!float", "!!map",
    "!!seq", "!ref", "!<tag:yaml.org,2002:str>", "!!null", "!!bool",
]  # fmt: skip
BYTES = b":-[]{}&*!|>\"'%@`#,?\t\0\n \x85\xff\xc3\xa9$"
KEY_LINE = re.compile(r"^(\s*(?:- )?)([^\s:#][^:#]*?):(\s|$)")


def _key_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if KEY_LINE.match(line)]


def byte_flip(data: bytes, rng: random.Random) -> bytes:
    i = rng.randrange(len(data))
    return data[:i] + bytes([rng.choice(BYTES)]) + data[i + rng.choice([0, 1]) :]


def delete_line(lines: list[str], rng: random.Random) -> list[str]:
    i = rng.randrange(len(lines))
    return lines[:i] + lines[i + 1 :]


def duplicate_line(lines: list[str], rng: random.Random) -> list[str]:
    i = rng.randrange(len(lines))
    j = rng.randrange(len(lines) + 1)
    return [*lines[:j], lines[i], *lines[j:]]


def shift_indent(lines: list[str], rng: random.Random) -> list[str]:
    i = rng.randrange(len(lines))
    line = lines[i]
    d = rng.choice([-4, -2, -1, 1, 2, 4])
    out = list(lines)
    out[i] = line[-d:] if d < 0 and line.startswith(" " * -d) else " " * max(d, 0) + line
    return out


def rename_key(lines: list[str], rng: random.Random) -> list[str]:
    cands = _key_lines(lines)
    if not cands:
        return lines
    i = rng.choice(cands)
    m = KEY_LINE.match(lines[i])
    assert m is not None
    out = list(lines)
    out[i] = m.group(1) + rng.choice(KEYS) + ":" + lines[i][m.end(2) + 1 :]
    return out


def _set_value(lines: list[str], rng: random.Random, values: list[str]) -> list[str]:
    cands = _key_lines(lines)
    if not cands:
        return lines
    i = rng.choice(cands)
    m = KEY_LINE.match(lines[i])
    assert m is not None
    out = list(lines)
    out[i] = lines[i][: m.end(2) + 1] + " " + rng.choice(values)
    return out


def swap_type(lines: list[str], rng: random.Random) -> list[str]:
    return _set_value(lines, rng, VALUES)


def huge_number(lines: list[str], rng: random.Random) -> list[str]:
    return _set_value(lines, rng, HUGE)


def insert_alias(lines: list[str], rng: random.Random) -> list[str]:
    """An anchor on one key's value and aliases to it elsewhere (possibly inside it)."""
    cands = _key_lines(lines)
    i, j = rng.choice(cands), rng.choice(cands)
    out = list(lines)
    m = KEY_LINE.match(out[i])
    assert m is not None
    out[i] = out[i][: m.end(2) + 1] + " &fz" + out[i][m.end(2) + 1 :]
    mj = KEY_LINE.match(out[j])
    assert mj is not None
    out[j] = out[j][: mj.end(2) + 1] + " " + rng.choice(["*fz", "[*fz, *fz, *fz]", "*nope"])
    if rng.random() < 0.3:
        bomb = ['    b0: &b0 ["x", "x", "x", "x", "x", "x", "x", "x"]']
        bomb += [f"    b{k}: &b{k} [" + ", ".join([f"*b{k - 1}"] * 8) + "]" for k in range(1, 9)]
        k = rng.randrange(len(out) + 1)
        out[k:k] = bomb
    return out


def insert_merge_key(lines: list[str], rng: random.Random) -> list[str]:
    cands = _key_lines(lines)
    i, j = rng.choice(cands), rng.choice(cands)
    out = list(lines)
    m = KEY_LINE.match(out[i])
    assert m is not None
    if not out[i].rstrip().endswith(":"):
        out[i] = out[i][: m.end(2) + 1] + " &mk " + out[i][m.end(2) + 1 :].lstrip()
    else:
        out[i] = out[i].rstrip() + " &mk"
    indent = " " * (len(out[j]) - len(out[j].lstrip()))
    value = rng.choice(["*mk", "[*mk]", "{count: 2}", "3", "null", "*nope", "[*mk, {a: 1}]"])
    out.insert(j + 1 if rng.random() < 0.5 else j, f"{indent}<<: {value}")
    return out


def insert_tag(lines: list[str], rng: random.Random) -> list[str]:
    cands = _key_lines(lines)
    i = rng.choice(cands)
    m = KEY_LINE.match(lines[i])
    assert m is not None
    out = list(lines)
    out[i] = lines[i][: m.end(2) + 1] + f" {rng.choice(TAGS)}" + lines[i][m.end(2) + 1 :]
    return out


LINE_MUTATORS = [
    delete_line, duplicate_line, shift_indent, rename_key, swap_type, huge_number,
    insert_alias, insert_merge_key, insert_tag,
]  # fmt: skip


def mutate(text: str, rng: random.Random) -> bytes:
    """One to three random mutations of ``text``."""
    data = text.encode()
    for _ in range(rng.choice([1, 1, 2, 3])):
        if rng.random() < 0.2:
            data = byte_flip(data, rng)
        else:
            lines = data.decode("utf-8", errors="replace").splitlines() or [""]
            data = ("\n".join(rng.choice(LINE_MUTATORS)(lines, rng)) + "\n").encode()
    return data


class _Timeout(BaseException):
    """Raised by the alarm inside a file that takes too long (not caught by the CLI)."""


def _check(path: Path, runner: Any, app: Any) -> tuple[int, str | None]:
    """The exit code of validating ``path`` and why it went wrong (None if it ended well)."""

    def alarm(_sig: int, _frame: Any) -> None:
        raise _Timeout

    signal.signal(signal.SIGPROF, alarm)
    signal.setitimer(signal.ITIMER_PROF, PER_FILE_S)  # the process's CPU time
    try:
        result = runner.invoke(app, ["validate", "-q", str(path)])
    except _Timeout:
        return -1, f"took more than {PER_FILE_S} s of CPU time"
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    output = result.output
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return -1, f"{type(result.exception).__name__}: {str(result.exception)[:200]}"
    if "Traceback" in output:
        return result.exit_code, "traceback in output"
    if result.exit_code not in (0, 1):
        return result.exit_code, f"exit {result.exit_code}"
    if result.exit_code == 1 and POSITION.search(output) is None:
        return 1, "no file:line:col: error: in output"
    return result.exit_code, None


def run_worker(start: int, count: int, workdir: Path) -> dict[str, Any]:
    """Validate files ``start .. start+count`` of the fuzz sequence; failures and exit tallies."""
    import typer.main
    import typer.testing

    from topo.cli.app import app

    command = typer.main.get_command(app)
    typer.testing._get_command = lambda _app: command  # build the click command once
    runner = typer.testing.CliRunner()
    for example in EXAMPLES:  # warm up (lazy imports) outside the per-file alarm
        runner.invoke(app, ["validate", "-q", str(example)])
    texts = [p.read_text() for p in EXAMPLES]
    failures, exits = [], {0: 0, 1: 0}
    for n in range(start, start + count):
        rng = random.Random(f"{SEED}-{n}")
        k = rng.randrange(len(EXAMPLES))
        data = mutate(texts[k], rng)
        path = workdir / f"{n:05d}-{EXAMPLES[k].name}"
        path.write_bytes(data)
        code, problem = _check(path, runner, app)
        if problem:
            failures.append({"n": n, "problem": problem, "text": data.decode(errors="replace")})
        else:
            exits[code] += 1
        path.unlink()
    return {"failures": failures, "count": count, "valid": exits[0], "invalid": exits[1]}


def _limit_memory() -> None:
    """Cap this worker's address space (set by the worker itself: a preexec_fn is unsafe
    in the multithreaded test process)."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))


def fuzz(total: int, workers: int = 2) -> list[dict[str, Any]]:
    """Run ``total`` mutated files in ``workers`` subprocesses; every failure found.
    Checks that the mutations reach past the YAML parser: some files stay valid."""
    per = -(-total // workers)
    procs = []
    with tempfile.TemporaryDirectory() as tmp:
        for w in range(workers):
            cmd = [sys.executable, __file__, str(w * per), str(per), tmp]
            pipe = subprocess.PIPE
            proc = subprocess.Popen(cmd, stdout=pipe, stderr=pipe, text=True, cwd=ROOT)
            procs.append(proc)
        failures, valid = [], 0
        for p in procs:
            out, err = p.communicate(timeout=total * PER_FILE_S)
            assert p.returncode == 0, f"worker died (exit {p.returncode}):\n{err[-3000:]}"
            report = json.loads(out.strip().splitlines()[-1])
            assert report["count"] == per
            failures.extend(report["failures"])
            valid += report["valid"]
    assert valid > total // 20, f"only {valid} of {total} mutated files are valid"
    return failures


def _report(failures: list[dict[str, Any]]) -> str:
    shown = [f"#{f['n']}: {f['problem']}\n{f['text'][:600]}" for f in failures[:8]]
    return f"{len(failures)} files went wrong:\n\n" + "\n\n".join(shown)


@pytest.mark.slow
def test_fuzzed_examples_never_traceback_or_hang() -> None:
    failures = fuzz(int(os.environ.get("TOPO_FUZZ_FILES", "2400")))
    assert not failures, _report(failures)


if __name__ == "__main__":
    _limit_memory()
    os.environ.pop("TOPO_MAX_NODES", None)
    print(json.dumps(run_worker(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))))
