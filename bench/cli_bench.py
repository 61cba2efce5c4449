"""How fast ``topo`` answers: each command in a fresh process, against ``python -c pass``.

A command line tool is waited for from the moment it starts, so what counts is a fresh
interpreter's wall time: start-up, imports, the answer. Each round runs every command
once, in a fresh process, next to a bare ``python -c pass`` (the floor no Python CLI can
go below) measured in the same round; the order of commands rotates from round to
round. Reported: medians, and the ratio to ``python -c pass`` taken round by round.

* ``topo --version``, ``topo --help``, ``topo run --help``;
* ``topo validate`` of ``consumer_producers.yaml``;
* a Tab: bash's completion request for ``topo run FILE -p `` (the file's parameters) and
  for ``topo run FILE --backend `` (the installed backends);
* ``topo ps -a`` with 20 ended run directories, when ``topo.cli.operate`` exists;
* ``topo run`` of ``consumer_producers.yaml`` with 10 nodes on procs: until it prints
  "all 10 nodes up", and until it exits.

With ``--base REV`` every command also runs with topo's code at commit REV (exported with
``git archive`` into a temporary directory and put first on ``PYTHONPATH``, the same
virtual environment), interleaved, and the ratio this/base is taken round by round.

    .venv/bin/python bench/cli_bench.py [--rounds 15] [--base REV] [--only run] [--name cli]

Writes bench/results/NAME.md and .json (NAME: cli). Not a test. Bytecode is cached
(``PYTHONDONTWRITEBYTECODE`` unset) as in an installed topo.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
EXAMPLE = ROOT / "examples" / "topologies" / "consumer_producers.yaml"
TEN = ["-p", "num_producers=9", "-p", "work_items=9"]  # 9 producers and a consumer
UP = "all 10 nodes up"


def _commands(home: Path) -> dict[str, tuple[list[str], dict[str, str], Path]]:
    """name -> (argv, extra environment, working directory)."""
    topo = [sys.executable, "-m", "topo"]
    file = str(EXAMPLE)

    def tab(line: str) -> dict[str, str]:
        words = line.split()
        cword = len(words) if line.endswith(" ") else len(words) - 1
        return {"_TOPO_COMPLETE": "complete_bash", "COMP_WORDS": line, "COMP_CWORD": str(cword)}

    out: dict[str, tuple[list[str], dict[str, str], Path]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], {}, home),
        "topo --version": ([*topo, "--version"], {}, home),
        "topo --help": ([*topo, "--help"], {}, home),
        "topo run --help": ([*topo, "run", "--help"], {}, home),
        "topo validate FILE": ([*topo, "validate", file], {}, home),
        "Tab: topo run FILE -p ": (topo, tab(f"topo run {file} -p "), home),
        "Tab: topo run FILE --backend ": (topo, tab(f"topo run {file} --backend "), home),
    }
    if importlib.util.find_spec("topo.cli.operate") is not None:
        state = {"TOPO_HOME": str(home / "state")}
        out["topo ps -a (20 ended runs)"] = ([*topo, "ps", "-a"], state, home / "ps")
        out["topo status RUN"] = ([*topo, "status", "run00"], state, home / "ps")
        out["topo logs RUN -n 20"] = ([*topo, "logs", "run00", "-n", "20"], state, home / "ps")
        out["topo stop RUN (ended)"] = ([*topo, "stop", "run00"], state, home / "ps")
    out["topo run: 10 nodes, procs"] = ([*topo, "run", file, *TEN, "--no-live"], {}, home)
    return out


def _once(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float | None]:
    """Wall seconds of one run of ``argv``, and for ``topo run`` when all nodes were up."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    up = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if up is None and UP in line:
            up = time.perf_counter() - start
    err = proc.stderr.read() if proc.stderr is not None else ""
    code = proc.wait(timeout=300)
    wall = time.perf_counter() - start
    if code != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({code}):\n{err[-2000:]}")
    return wall, up


def _export(rev: str, into: Path) -> str:
    """topo's package at commit ``rev``, unpacked under ``into``; its short hash."""
    short = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = into / "base.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", rev, "topo"], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "base", filter="data")
    return short


def _ended_runs(home: Path, count: int = 20) -> None:
    """``count`` ended run directories under ``home/ps/runs``: copies of one real run."""
    runs = home / "ps" / "runs"
    os.environ["TOPO_HOME"] = str(home / "state")  # the bench's own run index
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    subprocess.run(
        [sys.executable, "-m", "topo", "run", str(EXAMPLE), "-q", "--log-dir", str(home / "one")],
        env=env,
        check=True,
        capture_output=True,
    )
    (real,) = [p for p in (home / "one").iterdir() if not p.is_symlink()]  # not runs/latest
    from topo.runs import index

    for n in range(count):
        copy = runs / f"consumer_producers-20260101-0000{n:02d}"
        shutil.copytree(real, copy)
        index.register(f"run{n:02d}", copy, None)
    os.environ.pop("TOPO_HOME")


def _median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--base", help="also run topo's code at this commit, interleaved")
    parser.add_argument(
        "--only", help="only the commands whose name contains this (or any of a,b,c)"
    )
    parser.add_argument("--name", default="cli", help="results file stem")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="topo-cli-bench-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.pop("COLUMNS", None)
    trees = {"this": dict(env, PYTHONPATH=str(ROOT))}
    base = None
    try:
        if args.base:
            base = _export(args.base, home)
            trees["base"] = dict(env, PYTHONPATH=str(home / "base"))
        commands = _commands(home)
        if args.only:
            commands = {
                k: v
                for k, v in commands.items()
                if any(part in k for part in args.only.split(",")) or k == "python -c pass"
            }
        if any(" RUN" in k or k.startswith("topo ps") for k in commands):
            _ended_runs(home)
        for tree_env in trees.values():  # warm-up: bytecode caches written, files read once
            for argv, extra, cwd in commands.values():
                _once(argv, dict(tree_env, **extra), cwd)
        walls: dict[str, dict[str, list[float]]] = {}
        load_before = os.getloadavg()[0]
        names = list(commands)
        for r in range(args.rounds):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                argv, extra, cwd = commands[name]
                order = list(trees) if r % 2 == 0 else list(reversed(trees))
                for tree in order if name != "python -c pass" else ["this"]:
                    wall, up = _once(argv, dict(trees[tree], **extra), cwd)
                    walls.setdefault(name, {}).setdefault(tree, []).append(wall)
                    if up is not None:
                        until_up = walls.setdefault(f"{name}: until {UP}", {})
                        until_up.setdefault(tree, []).append(up)
        load_after = os.getloadavg()[0]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    floor = walls["python -c pass"]["this"]
    rows = []
    for name, by_tree in walls.items():
        this = by_tree["this"]
        row: dict[str, object] = {
            "command": name,
            "this_s": _median(this),
            "over_python": _median([a / b for a, b in zip(this, floor, strict=True)]),
        }
        if "base" in by_tree:
            other = by_tree["base"]
            row["base_s"] = _median(other)
            row["this_over_base"] = _median([a / b for a, b in zip(this, other, strict=True)])
        rows.append(row)
    meta = {
        "this": head,
        "base": base,
        "rounds": args.rounds,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": [round(load_before, 1), round(load_after, 1)],
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=2))
    lines = _table(meta, rows, args)
    (RESULTS / f"{args.name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def _table(meta: dict[str, object], rows: list[dict[str, object]], args: object) -> list[str]:
    """The results as a markdown page."""
    base = meta["base"]
    cmd = " ".join(sys.argv[1:])
    lines = [
        f"# How fast topo answers ({meta['this']}" + (f" against {base})" if base else ")"),
        "",
        f"`.venv/bin/python bench/cli_bench.py {cmd}` — Python {meta['python']}, "
        f"{meta['cpus']} CPUs (shared, noisy), load average {meta['load'][0]} → "  # type: ignore[index]
        f"{meta['load'][1]}, {meta['rounds']} rounds. Each command in a fresh process; "  # type: ignore[index]
        "medians, and ratios taken round by round: to `python -c pass` measured in the "
        "same round" + (", and this/base (below 1: this checkout is faster)." if base else "."),
        "",
    ]
    if base:
        lines += [
            "| command | this: median s | × python -c pass | base: median s | this/base |",
            "| --- | ---: | ---: | ---: | ---: |",
        ]
    else:
        lines += ["| command | median s | × python -c pass |", "| --- | ---: | ---: |"]
    for row in rows:
        over = f"{row['over_python']:.2f}" if "over_python" in row else ""
        cells = [str(row["command"]), f"{row['this_s']:.3f}", over]
        if base:
            has = "base_s" in row
            cells += [
                f"{row['base_s']:.3f}" if has else "",
                f"{row['this_over_base']:.2f}" if has else "",
            ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


if __name__ == "__main__":
    main()
