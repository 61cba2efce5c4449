"""What the Launchpad front end costs: building the IR, the payload table, and start-up.

* compile: ``topo.launchpad.compile_program`` of an Acme-shaped program (a replay stand-in,
  a learner, N actors built by one closure over a config of ~``--config-kb`` KiB, each
  with its own JAX-style key) -- the time, and the size of the program's JSON with the
  payload table against the same program with every pickle written inline (IR v2's way);
* start-up: ``lp.launch(program, launch_type="test_mp")`` until every node is ready,
  against ``topo.launch(FILE, backend="procs")`` of the equivalent topology file, for
  ``--nodes`` trivial courier nodes, in interleaved rounds (medians and the paired ratio).

Run:  ``.venv/bin/python bench/launchpad_bench.py [--actors 256] [--nodes 100] [--repeats 5]``.
Writes bench/results/launchpad.json and bench/results/launchpad.md.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE)]

import topo  # noqa: E402
import topo.launchpad as lp  # noqa: E402
from topo.ir import codec  # noqa: E402


class Trivial:
    """A trivial courier node."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = len(args) + len(kwargs)

    def ping(self) -> int:
        return self.args


def acme_shaped(actors: int, config_kb: int) -> lp.Program:
    """A replay, a counter, a learner and ``actors`` actors made by one closure."""
    config = {"layers": list(range(config_kb * 128)), "name": "cartpole"}  # ~config_kb KiB

    def build_actor(key: Any, replay: Any, variable_source: Any, counter: Any, aid: int) -> Any:
        return Trivial(config, key, replay, variable_source, counter, aid)

    program = lp.Program("acme_shaped")
    replay = program.add_node(lp.CourierNode(Trivial), label="replay")
    counter = program.add_node(lp.CourierNode(Trivial), label="counter")
    learner = program.add_node(lp.CourierNode(Trivial, replay, counter), label="learner")
    keys = np.random.default_rng(0).integers(0, 2**32, size=(actors, 2), dtype=np.uint32)
    with program.group("actor"):
        for aid in range(actors):
            program.add_node(lp.CourierNode(build_actor, keys[aid], replay, learner, counter, aid))
    return program


def measure_compile(actors: int, config_kb: int, repeats: int) -> dict[str, Any]:
    times, encode_s, decode_s = [], [], []
    inline_size = table_size = payload = 0
    for _ in range(repeats):
        program = acme_shaped(actors, config_kb)
        start = time.perf_counter()
        ir = lp.compile_program(program).program
        times.append(time.perf_counter() - start)
        start = time.perf_counter()
        text = codec.dumps(ir, indent=None)
        encode_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        codec.loads(text)
        decode_s.append(time.perf_counter() - start)
        table_size = len(text)
        factory = ir.nodes[-1].factory
        payload = len(factory.pickled or b"") if factory is not None else 0
        inline_size = len(json.dumps(codec.encode(ir, type(ir))))
    return {
        "actors": actors,
        "config_kib": config_kb,
        "compile_s": statistics.median(times),
        "encode_s": statistics.median(encode_s),
        "decode_s": statistics.median(decode_s),
        "json_bytes_table": table_size,
        "json_bytes_inline": inline_size,
        "closure_pickle_bytes": payload,
    }


def yaml_file(nodes: int, folder: Path) -> Path:
    path = folder / "trivial.yaml"
    path.write_text(
        f"name: trivial\nnodes:\n  node: {{target: 'launchpad_bench:Trivial', count: {nodes}}}\n"
    )
    return path


def lp_program(nodes: int) -> lp.Program:
    # By import path, as the YAML names it (this file runs as __main__, which is pickled).
    trivial = importlib.import_module("launchpad_bench").Trivial
    program = lp.Program("trivial")
    with program.group("node"):
        for _ in range(nodes):
            program.add_node(lp.CourierNode(trivial))
    return program


def time_ready(start_it: Any) -> float:
    start = time.perf_counter()
    run = start_it()
    elapsed = time.perf_counter() - start
    run.stop(timeout=120)
    return elapsed


def measure_startup(nodes: int, repeats: int, folder: Path) -> dict[str, Any]:
    path = yaml_file(nodes, folder)
    lp_s, yaml_s = [], []

    def via_lp() -> Any:
        launched = lp.launch(lp_program(nodes), launch_type="test_mp", log_dir=str(folder))
        if not launched.run.wait_ready(120):
            raise RuntimeError("lp.launch: not every node was up")
        return launched.run

    def via_yaml() -> Any:
        return topo.launch(path, "procs", log_dir=folder, ready_timeout=120)

    for _ in range(repeats):
        lp_s.append(time_ready(via_lp))
        yaml_s.append(time_ready(via_yaml))
    ratios = [a / b for a, b in zip(lp_s, yaml_s, strict=True)]
    return {
        "nodes": nodes,
        "lp_launch_s": statistics.median(lp_s),
        "topo_launch_s": statistics.median(yaml_s),
        "ratio": statistics.median(ratios),
        "rounds": repeats,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, default=256)
    parser.add_argument("--config-kb", type=int, default=256)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    compiled = measure_compile(args.actors, args.config_kb, args.repeats)
    with tempfile.TemporaryDirectory() as tmp:
        startup = measure_startup(args.nodes, args.repeats, Path(tmp))
    load_after = os.getloadavg()[0]
    result = {
        "compile": compiled,
        "startup": startup,
        "load_avg": [load_before, load_after],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
    }
    out = HERE / "results"
    out.mkdir(exist_ok=True)
    (out / "launchpad.json").write_text(json.dumps(result, indent=2))
    c, s = compiled, startup
    md = f"""# topo.launchpad benchmark

`.venv/bin/python bench/launchpad_bench.py --actors {args.actors} --config-kb {args.config_kb} \
--nodes {args.nodes} --repeats {args.repeats}` ({result["machine"]}; load average \
{load_before:.1f} -> {load_after:.1f}; medians of {args.repeats} rounds).

| Acme-shaped program, {c["actors"]} actors built by one closure \
(pickled: {c["closure_pickle_bytes"] / 1024:.0f} KiB) | |
|---|---:|
| `compile_program` (Launchpad program -> IR) | {c["compile_s"] * 1000:.0f} ms |
| program JSON with the payload table | {c["json_bytes_table"] / 2**20:.2f} MiB |
| the same with every pickle inline (IR v2) | {c["json_bytes_inline"] / 2**20:.1f} MiB |
| encode / decode the JSON | {c["encode_s"] * 1000:.0f} ms / {c["decode_s"] * 1000:.0f} ms |

| {s["nodes"]} trivial courier nodes on procs, start -> every node ready | median |
|---|---:|
| `lp.launch(program, launch_type="test_mp")` | {s["lp_launch_s"]:.2f} s |
| `topo.launch(file, backend="procs")` (same nodes from YAML) | {s["topo_launch_s"]:.2f} s |
| ratio, paired per round | {s["ratio"]:.2f}x |
"""
    (out / "launchpad.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
