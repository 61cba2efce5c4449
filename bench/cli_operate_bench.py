"""How fast the commands that operate a run answer (issue 40), on a live run of
``acme_distributed.yaml`` on procs, idle and beside two busy loops.

* ``topo ps`` and ``topo status RUN``: the modules each imports (``python -X importtime``,
  one line per module) and its wall time, each in a fresh process (median of the
  rounds). Goals: at most 200 modules, at most 0.3 s on an idle machine.
* ``topo apply RUN FILE -p num_actors=2 --dry-run``: seconds from the process's start to
  the first line of its plan on stdout (a pty, as in a terminal: lines are written as
  they come), to its exit, and whether it imported TensorFlow, Reverb or JAX. Goal: the
  plan within 1 s, none of those imported.
* ``topo run FILE -d`` and ``topo run --resume RUN_DIR -d``: seconds from every node
  being up (the run's ``status.json``: ``started`` + ``ready_s``) to the command's exit,
  and, for the whole picture, from the command's start to ``started`` and ``ready_s``
  itself. Goal: within 1 s of the nodes being up. Each run is then killed
  (``topo stop --kill``; the resumed one's snapshot comes from a run stopped gracefully).
  With ``--base REV`` the same with topo's code at commit REV, interleaved run by run.

The code measured is a commit's (``--this``, default HEAD): its ``topo`` package exported
with ``git archive`` and put first on ``PYTHONPATH``; the examples and tests come from
this checkout.

"Idle" is the live run alone (its actors and learner keep the 2 cores busy, as a user's
training does); "busy" adds two ``sh -c 'while :; do :; done'`` loops this bench starts
and ends by pid. Ratios busy/idle are of medians. The bench keeps its runs in a
``TOPO_HOME`` and a directory of its own, and removes them at the end.

    .venv/bin/python bench/cli_operate_bench.py [--rounds 9] [--runs 4] [--base REV]
        [--this REV]

Writes bench/results/cli-operate.md and .json. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pty
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
EXAMPLE = ROOT / "examples" / "topologies" / "acme_distributed.yaml"
TOPO = [sys.executable, "-m", "topo"]
FRAMEWORKS = ("tensorflow", "reverb", "jax")
GOALS = {"modules": 200, "ps_status_s": 0.3, "apply_plan_s": 1.0, "run_d_s": 1.0}


class Bench:
    """The bench's own place: a working directory and ``TOPO_HOME``, and its environment
    (``code``: the topo package's parent directory, this checkout's by default)."""

    def __init__(self, home: Path, code: Path = ROOT) -> None:
        self.home = home
        self.env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        path = os.pathsep.join([str(code), str(ROOT)])  # its topo first, then the examples
        self.env.update(PYTHONPATH=path, TOPO_HOME=str(home / "state"), NO_COLOR="1")
        self.env.pop("COLUMNS", None)

    def topo(
        self, *args: str, timeout: float = 600, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [*TOPO, *args],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise SystemExit(f"topo {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return done

    def wall(self, *args: str) -> float:
        start = time.perf_counter()
        self.topo(*args)
        return time.perf_counter() - start

    def modules(self, *args: str) -> tuple[int, list[str]]:
        """How many modules ``topo ARGS`` imports, and which of FRAMEWORKS among them."""
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "topo", *args],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        names = [
            line.rsplit("|", 1)[1].strip()
            for line in done.stderr.splitlines()
            if line.startswith("import time:") and "|" in line
        ][1:]  # the first is the header
        tops = {n.strip().split(".")[0] for n in names}
        return len(names), [f for f in FRAMEWORKS if f in tops]

    def plan_time(self, *args: str) -> tuple[float, float]:
        """``topo ARGS`` with its stdout a pty 120 columns wide: seconds to its first
        non-empty line, and to its exit."""
        master, slave = pty.openpty()
        env = dict(self.env, COLUMNS="120", LINES="40")
        start = time.perf_counter()
        proc = subprocess.Popen(
            [*TOPO, *args],
            cwd=self.home,
            env=env,
            stdout=slave,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
        )
        os.close(slave)
        first, seen = None, b""
        while True:
            ready, _, _ = select.select([master], [], [], 0.5)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the pty's other side closed: the command ended
                    chunk = b""
                if not chunk:
                    break
                seen += chunk
                if first is None and any(line.strip() for line in seen.split(b"\n")[:-1]):
                    first = time.perf_counter() - start
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=600)
        end = time.perf_counter() - start
        os.close(master)
        if code != 0:
            raise SystemExit(f"topo {' '.join(args)} failed ({code}):\n{seen.decode()[-2000:]}")
        return (first if first is not None else end), end

    def run_detached(self, *args: str) -> dict[str, Any]:
        """``topo run ARGS -d``: the run, and how long from the start to its ``started``,
        its ``ready_s`` and from every node up to the command's exit."""
        start = time.time()
        done = self.topo("run", *args, "-d")
        returned = time.time()
        run_id, run_dir = done.stdout.split()
        record = json.loads((Path(run_dir) / "status.json").read_text())
        up = record["started"] + record["ready_s"]
        return {
            "id": run_id,
            "run_dir": run_dir,
            "to_started_s": record["started"] - start,
            "ready_s": record["ready_s"],
            "up_to_exit_s": returned - up,
        }


def busy_loops(n: int = 2) -> list[subprocess.Popen[bytes]]:
    """``n`` shell busy loops (ended by pid: ``end_loops``)."""
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]


def end_loops(loops: list[subprocess.Popen[bytes]]) -> None:
    for loop in loops:
        os.kill(loop.pid, signal.SIGKILL)
        loop.wait(10)


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def export(rev: str, into: Path) -> tuple[str, Path]:
    """topo's package at commit ``rev`` unpacked in a directory of ``into``: its short
    hash and the directory to put first on ``PYTHONPATH`` (what is measured is a commit,
    whatever the working tree holds meanwhile)."""
    short = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    archive = into / f"{short}.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", rev, "topo"], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / short, filter="data")
    return short, into / short


def measure(
    bench: Bench, base: Bench | None, live: str, rounds: int, runs: int, resume_from: str
) -> dict[str, Any]:
    """One condition: every figure of the bench, as lists of seconds (``base:`` keys:
    ``run -d`` with the code of ``--base``, interleaved with this checkout's)."""
    out: dict[str, list[float]] = {}
    commands = {
        "ps": ("ps",),
        "status": ("status", live),
        "apply": ("apply", live, str(EXAMPLE), "-p", "num_actors=2", "--dry-run"),
    }
    for r in range(rounds):
        names = list(commands)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            if name == "apply":
                plan, end = bench.plan_time(*commands[name])
                out.setdefault("apply_plan", []).append(plan)
                out.setdefault("apply_exit", []).append(end)
            else:
                out.setdefault(name, []).append(bench.wall(*commands[name]))
    for kind, args in (
        ("run_d", (str(EXAMPLE), "-p", "max_actor_steps=null")),
        ("resume_d", ("--resume", resume_from)),
    ):
        trees = [("", bench)] + ([("base:", base)] if base is not None else [])
        for i in range(runs):
            for prefix, tree in trees if i % 2 == 0 else trees[::-1]:
                got = tree.run_detached(*args)
                bench.topo("stop", got["id"], "--kill", check=False)  # (exit 130: killed)
                for key in ("to_started_s", "ready_s", "up_to_exit_s"):
                    out.setdefault(f"{prefix}{kind}.{key}", []).append(got[key])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9, help="rounds of ps, status, apply")
    parser.add_argument("--runs", type=int, default=4, help="run -d and --resume -d each")
    parser.add_argument("--this", default="HEAD", help="the commit measured (default HEAD)")
    parser.add_argument("--base", help="also time run -d with topo's code at this commit")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="topo-cli-operate-bench-"))
    head, code = export(args.this, home)
    bench = Bench(home, code)
    base, base_rev = None, None
    if args.base:
        base_rev, code = export(args.base, home)
        base = Bench(home, code)
    loops: list[subprocess.Popen[bytes]] = []
    pids: list[int] = []
    live = None
    try:
        # a run stopped gracefully: its snapshot at the stop is what --resume starts from
        first = bench.run_detached(str(EXAMPLE), "-p", "max_actor_steps=null")
        bench.topo("stop", first["id"])
        live = bench.run_detached(str(EXAMPLE), "-p", "max_actor_steps=null")["id"]
        counts = {
            name: bench.modules(*argv)
            for name, argv in (
                ("ps", ("ps",)),
                ("status", ("status", live)),
                ("apply", ("apply", live, str(EXAMPLE), "-p", "num_actors=2", "--dry-run")),
            )
        }
        load = {"idle": [os.getloadavg()[0]]}
        idle = measure(bench, base, live, args.rounds, args.runs, first["run_dir"])
        load["idle"].append(os.getloadavg()[0])
        loops = busy_loops()
        pids = [p.pid for p in loops]
        load["busy"] = [os.getloadavg()[0]]
        busy = measure(bench, base, live, args.rounds, args.runs, first["run_dir"])
        load["busy"].append(os.getloadavg()[0])
        end_loops(loops)
        loops = []
    finally:
        end_loops(loops)
        if live is not None:
            subprocess.run([*TOPO, "stop", live, "--kill"], cwd=home, env=bench.env, check=False)
        shutil.rmtree(home, ignore_errors=True)
    meta = {
        "commit": head,
        "base": base_rev,
        "rounds": args.rounds,
        "runs": args.runs,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load": {k: [round(x, 1) for x in v] for k, v in load.items()},
        "busy_loop_pids": pids,
    }
    data = {"meta": meta, "modules": counts, "idle": idle, "busy": busy}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cli-operate.json").write_text(json.dumps(data, indent=2))
    lines = report(data)
    (RESULTS / "cli-operate.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


ROWS = (
    ("ps", "`topo ps` (wall)", "ps_status_s"),
    ("status", "`topo status RUN` (wall)", "ps_status_s"),
    ("apply_plan", "`topo apply RUN FILE --dry-run`: to the plan's first line", "apply_plan_s"),
    ("apply_exit", "`topo apply RUN FILE --dry-run`: to its exit", None),
    ("run_d.up_to_exit_s", "`topo run FILE -d`: from every node up to its exit", "run_d_s"),
    ("run_d.ready_s", "`topo run FILE -d`: `ready_s` (started → every node up)", None),
    ("run_d.to_started_s", "`topo run FILE -d`: from its start to `started`", None),
    ("resume_d.up_to_exit_s", "`topo run --resume RUN_DIR -d`: every node up → exit", "run_d_s"),
    ("resume_d.ready_s", "`topo run --resume RUN_DIR -d`: `ready_s`", None),
    ("resume_d.to_started_s", "`topo run --resume RUN_DIR -d`: start → `started`", None),
    ("base:run_d.up_to_exit_s", "base: `topo run FILE -d`: every node up → exit", "run_d_s"),
    ("base:resume_d.up_to_exit_s", "base: `run --resume RUN_DIR -d`: up → exit", "run_d_s"),
)


def report(data: dict[str, Any]) -> list[str]:
    """The results as a markdown page."""
    meta = data["meta"]
    load = meta["load"]
    command = f"--rounds {meta['rounds']} --runs {meta['runs']}"
    if meta["base"]:
        command += f" --base {meta['base']}"
    lines = [
        f"# Operating a run: how fast the commands answer ({meta['commit']})",
        "",
        f"`.venv/bin/python bench/cli_operate_bench.py {command}` — Python {meta['python']}, "
        f"{meta['cpus']} CPUs shared with other work (load average idle {load['idle'][0]} → "
        f"{load['idle'][1]}, busy {load['busy'][0]} → {load['busy'][1]}). A live run of "
        "`acme_distributed.yaml` on procs (training, no step budget) throughout; *busy*: "
        "beside two busy loops the bench started (pids "
        f"{', '.join(map(str, meta['busy_loop_pids']))}, ended by pid). Medians of "
        f"{meta['rounds']} fresh processes per command ({meta['runs']} runs for `run -d`); "
        "ratio: busy median / idle median.",
        "",
        "| command | modules | TF / Reverb / JAX imported |",
        "| --- | ---: | --- |",
    ]
    for name, (count, frameworks) in data["modules"].items():
        lines.append(f"| `topo {name}` | {count} | {', '.join(frameworks) or 'none'} |")
    lines += [
        "",
        "| measure | idle: median s | busy: median s | busy / idle | goal |",
        "| --- | ---: | ---: | ---: | --- |",
    ]
    for key, label, goal in ROWS:
        if key not in data["idle"]:
            continue
        label = label.replace("base:", f"base ({meta['base']}):")
        a, b = median(data["idle"].get(key, [])), median(data["busy"].get(key, []))
        want = (
            ""
            if goal is None
            else f"≤ {GOALS[goal]} s" + (" idle" if goal == "ps_status_s" else "")
        )
        lines.append(f"| {label} | {a:.3f} | {b:.3f} | {b / a:.2f} | {want} |")
    lines += [
        "",
        f"Goals (issue 40): `ps` and `status` at most {GOALS['modules']} modules and "
        f"{GOALS['ps_status_s']} s idle; `apply`'s plan within {GOALS['apply_plan_s']} s "
        f"and no framework imported; `run -d` within {GOALS['run_d_s']} s of its nodes "
        "being up.",
    ]
    return lines


if __name__ == "__main__":
    main()
