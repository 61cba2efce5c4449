"""Accelerator benchmark: a learner that trains a JAX network on the accelerator while
8 actors, each using JAX, run on the CPU -- on a machine with one (a TPU v5e chip here).

Three runs of one program (``bench/accel_nodes.py``) on ``-b procs``:

* ``learner on the accelerator``: the learner asks for one (``resources: {accelerators:
  {kind: tpu}}``), the actors ask for nothing (topo's default: CPU only);
* ``default turned off``: the same with the actors' ``resources: {cpu_only: false}`` --
  every process may open the chip, as before topo held them off it;
* ``learner on the CPU``: the learner asks for nothing: its steps per second on the CPU,
  the baseline.

Reported: each run's exit code, the platform each node ran on, the learner's steps per
second (and the ratio accelerator / CPU), and for a failed run its first error lines.
Run on the machine with the accelerator, from the repository root:
``python bench/accelerators_bench.py [--kind tpu] [--actors 8] [--seconds 10] [--out DIR]``
(writes accelerators.json and accelerators.md to DIR, default bench/results).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RUN_S = 420


def topology(kind: str, actors: int, seconds: float, variant: str) -> str:
    learner = f"{{accelerators: {{kind: {kind}}}}}" if variant != "cpu_learner" else "{}"
    if variant == "auto":  # the kind found on the machine (/dev), as the examples ask
        learner = "{accelerators: {kind: auto}}"
    actor = "{cpu_only: false}" if variant == "default_off" else "{}"
    # the actors first: they start before the learner (with the default off, one of
    # them may then open the chip first)
    return (
        "name: accel\n"
        "nodes:\n"
        f'  actor: {{target: "accel_nodes:Actor", count: {actors}, resources: {actor}}}\n'
        f'  learner: {{target: "accel_nodes:Learner", args: {{seconds: {seconds}}}, '
        f"resources: {learner}}}\n"
        '  coordinator: {target: "accel_nodes:Coordinator", '
        'args: {learner: "@learner", actors: "@actor"}}\n'
    )


def _text(output: str | bytes | None) -> str:
    """A child's captured output as text (a timeout's comes as bytes)."""
    if isinstance(output, bytes):
        return output.decode(errors="replace")
    return output or ""


def one_run(kind: str, actors: int, seconds: float, variant: str, work: Path) -> dict[str, Any]:
    path = work / f"{variant}.yaml"
    path.write_text(topology(kind, actors, seconds, variant))
    env = dict(os.environ, PYTHONUNBUFFERED="1", NO_COLOR="1", COLUMNS="200")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT), str(ROOT / "bench"), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    cmd = [sys.executable, "-m", "topo", "run", str(path), "-b", "procs", "--no-live"]
    cmd += ["--log-dir", str(work / "runs")]
    t0 = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_S, env=env)
        code, out = done.returncode, done.stdout + done.stderr
    except subprocess.TimeoutExpired as exc:  # (its output is bytes, even with text=True)
        code, out = None, _text(exc.stdout) + _text(exc.stderr)
    took = time.perf_counter() - t0
    found = re.search(r"RESULT (\{.*\})", out)
    result = json.loads(found.group(1)) if found else None
    errors = [
        line.strip()
        for line in out.splitlines()
        if re.search(r"(?i)(✗|error|failed|in use|lockfile|unable)", line)
    ][:12]
    said: list[str] = []  # what the nodes' logs say of the chip
    for log in sorted((work / "runs").glob("*/logs/*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if re.search(r"(?i)tpu|libtpu|platform|backend", line) and len(said) < 12:
                said.append(f"{log.stem}: {line.strip()[:300]}")
    devices, memory = {}, []  # what status.json says each node holds; its memory rows
    for run_dir in (work / "runs").glob("accel-*"):
        status = run_dir / "status.json"
        if status.is_file():
            nodes = json.loads(status.read_text()).get("nodes", [])
            devices = {n["id"]: n.get("device") for n in nodes}
        for rows in run_dir.glob("metrics/*.jsonl"):
            for line in rows.read_text(errors="replace").splitlines():
                if "device_memory_mib" in line:
                    memory.append(json.loads(line))
        shutil.rmtree(run_dir, ignore_errors=True)  # (the next run's logs apart)
    planned = ""
    if variant == "auto":  # what topo plan says the learner gets here
        shown = subprocess.run(
            [sys.executable, "-m", "topo", "plan", str(path), "-b", "procs"],
            capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        planned = shown.stdout[shown.stdout.find("accelerators") :].strip() or shown.stderr[-500:]
    print(f"{variant}: exit {code} in {took:.1f}s", flush=True)
    return {"variant": variant, "exit_code": code, "wall_s": round(took, 1), "result": result,
            "errors": errors, "logs": said, "tail": out[-3000:], "devices": devices,
            "device_memory": memory[-3:], "plan": planned}  # fmt: skip


def report(runs: list[dict[str, Any]], args: argparse.Namespace, facts: dict[str, Any]) -> str:
    names = {
        "default": "learner on the accelerator, actors CPU-only (topo's default)",
        "default_off": "the default turned off for the actors (cpu_only: false)",
        "cpu_learner": "learner on the CPU (asks for no accelerator)",
        "auto": "learner asks for `auto` (as the examples' learners): the chip topo found",
    }
    lines = [
        "# Accelerators: the learner on the chip, the actors on the CPU",
        "",
        f"`python bench/accelerators_bench.py --kind {args.kind} --actors {args.actors} "
        f"--seconds {args.seconds:g}` on {facts['machine']} ({facts['when']}, Python "
        f"{facts['python']}, JAX {facts['jax']}): one program of a learner (a two-layer "
        f"bf16 network, 2048 wide, batch 1024, trained {args.seconds:g} s once compiled), "
        f"{args.actors} actors using JAX and a coordinator, on `-b procs`.",
        "",
        "| run | exit | learner's platform | learner steps/s | actors' platforms |",
        "| --- | ---: | --- | ---: | --- |",
    ]
    rate: dict[str, float | None] = {}
    for run in runs:
        res = run["result"] or {}
        learner = res.get("learner") or {}
        actors = sorted({a["platform"] for a in res.get("actors") or []})
        rate[run["variant"]] = learner.get("steps_per_s")
        lines.append(
            f"| {names[run['variant']]} | {run['exit_code']} | {learner.get('platform', '—')} | "
            f"{learner.get('steps_per_s', '—')} | {', '.join(actors) or '—'} |"
        )
    on_chip, on_cpu = rate.get("default"), rate.get("cpu_learner")
    if on_chip and on_cpu:
        lines += ["", f"Learner steps/s, accelerator / CPU: {on_chip / on_cpu:.1f}×."]
    for run in runs:
        if run["variant"] == "auto" and run.get("devices") is not None:
            held = {n: d for n, d in sorted(run["devices"].items()) if d}
            lines += ["", "`auto`: `topo plan -b procs` on the machine (devices found in /dev):",
                      "", "```", run.get("plan") or "(nothing)", "```", "",
                      f"status.json, the nodes that hold a device: {held or 'none'}; the "
                      "learner's device memory rows (`device_memory_mib`, peak): "
                      + (", ".join(f"{r.get('device_memory_mib')} MiB (peak "
                                   f"{r.get('device_memory_peak_mib')})"
                                   for r in run.get("device_memory") or []) or "none")]  # fmt: skip
    for run in runs:
        if run["exit_code"] != 0:
            lines += ["", f"`{run['variant']}` ended with exit {run['exit_code']}; its first "
                      "error lines, and what its nodes' logs say of the chip:", "", "```",
                      *run["errors"], *run["logs"], "```"]  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", default="tpu", choices=["tpu", "gpu"])
    parser.add_argument("--actors", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--variants", default="default,default_off,cpu_learner,auto")
    parser.add_argument(
        "--render", type=Path, help="write the report again from this accelerators.json"
    )
    args = parser.parse_args()
    if args.render is not None:
        data = json.loads(args.render.read_text())
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "accelerators.json").write_text(json.dumps(data, indent=2) + "\n")
        (args.out / "accelerators.md").write_text(report(data["runs"], args, data["facts"]))
        return
    # what the machine has, asked in a process of its own: one that opened the chip
    # here would hold it for the whole benchmark
    said = subprocess.run(
        [sys.executable, "-c", "import jax; d = jax.devices(); "
         "print(d[0].device_kind, len(d), jax.__version__)"],
        capture_output=True, text=True, timeout=300,
    ).stdout.split()  # fmt: skip
    kind, count, version = (" ".join(said[:-2]), said[-2], said[-1]) if said else ("?", "?", "?")
    facts = {
        "machine": f"{kind} ×{count}, {os.cpu_count()} CPUs",
        "when": time.strftime("%Y-%m-%d %H:%M"),
        "python": platform.python_version(),
        "jax": version,
    }
    runs = []
    with tempfile.TemporaryDirectory(prefix="topo-accel-") as tmp:
        for variant in args.variants.split(","):
            runs.append(one_run(args.kind, args.actors, args.seconds, variant, Path(tmp)))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "accelerators.json").write_text(
        json.dumps({"facts": facts, "runs": runs}, indent=2) + "\n"
    )
    text = report(runs, args, facts)
    (args.out / "accelerators.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
