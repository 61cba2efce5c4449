"""Benchmark of the ``slurm`` backend: time to ready of N trivial courier executables
(default 100) run with ``-b slurm`` inside an allocation of 3 Slurm nodes, against the
same program on ``procs`` on this machine (and on ``ssh`` over the 3 test hosts when
``--test-hosts``: the Slurm nodes in test hosts, ssh over the same hosts), in the same
run, interleaved, medians of ``--repeats`` (default 5) and the ratio to procs (and to
ssh).

Time to ready: from the ``topo.launch`` call to every node ready (the allocation's read,
one ``srun`` step per node starting topo's agent, the forks), as a user waits for it;
then the run is stopped and its processes are checked gone.

Inside a job (``SLURM_JOB_ID`` set) the bench uses that job; elsewhere it starts the
tests' Slurm cluster on this machine (``tests/backends/slurm/cluster.py``: munged,
slurmctld, one slurmd per node; needs root and Debian's slurm-wlm and munge) with 3
nodes, holds them with ``salloc --no-shell -N3`` and stops it all at the end. Run from
the repository root: ``.venv/bin/python bench/slurm_bench.py [--nodes 100]
[--repeats 5] [--test-hosts]`` (the test hosts: under ``flock /work/notes/hosts.lock``).
Writes bench/results/slurm-bench.md.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
TARGET = "bench.slurm_bench:Trivial"
READY_S = 300.0
GONE_S = 60.0


class Trivial:
    """A trivial courier node (this module imports nothing heavy: every fork server
    imports it)."""

    def ping(self) -> int:
        return 1


def program(count: int) -> Any:
    """``count`` trivial couriers."""
    from topo.api import load

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(f"name: slurmbench\nnodes:\n  t: {{target: '{TARGET}', count: {count}}}\n")
        return load(path).program


def time_to_ready(prog: Any, backend: str, options: dict[str, Any], log_dir: Path) -> float:
    """``topo.launch`` -> every node ready (seconds); then stopped, checked gone."""
    from topo.api import launch
    from topo.testing import wait_gone

    t0 = time.perf_counter()
    run = launch(prog, backend=backend, backend_options=options, log_dir=log_dir)
    ok = run.wait_ready(READY_S)
    ready = time.perf_counter() - t0
    pids = set(run.pids()) | {n.pid for n in run.status() if n.pid}
    where = Counter(run.launcher.backend.location(e.id) or "here" for e in prog.executables)
    stopped = run.stop(timeout=120)
    if not ok:
        raise RuntimeError(f"{backend}: not ready: {run.failure or 'timed out'}")
    assert stopped is not None, f"{backend}: did not stop"
    left = wait_gone(pids, GONE_S)
    assert not left, f"{backend}: left behind {left}"
    print(f"  {backend}: {ready:.2f}s {dict(sorted(where.items()))}", flush=True)
    return ready


@contextmanager
def allocation(nodes: int, hosts: Any = None) -> Iterator[str]:
    """A job of ``nodes`` nodes to run in (this one's, or the test cluster's: with
    ``hosts``, a ``HostSet`` of test hosts, one slurmd in each); its id."""
    if os.environ.get("SLURM_JOB_ID"):
        yield os.environ["SLURM_JOB_ID"]
        return
    from tests.backends.slurm import cluster

    why = cluster.unavailable()
    if why is not None:
        raise SystemExit(f"no Slurm job and no test cluster: {why}")
    root = Path(tempfile.mkdtemp(prefix="topo-slurm-bench-"))
    placed: tuple[Any, ...] = ()
    ctld = "127.0.0.1"
    if hosts is not None:
        from tests.backends.ssh.testhosts import NET

        placed = tuple(
            cluster.NodeHost(name, address, hosts.sshd_pids(name)[0])
            for name, address in zip(hosts.names, hosts.addresses, strict=True)
        )[:nodes]
        ctld = f"{NET}.1"
    names = tuple(f"n{i + 1}" for i in range(nodes))
    running = cluster.start(root, names, hosts=placed, ctld_address=ctld)
    try:
        done = running.run("salloc", "--no-shell", "-J", "bench", f"-N{nodes}", timeout=120)
        found = re.search(r"Granted job allocation (\d+)", done.stderr)
        if not found:
            raise SystemExit(f"salloc failed: {done.stderr}")
        job = found.group(1)
        saved = dict(os.environ)
        os.environ.update(running.env())
        os.environ["SLURM_JOB_ID"] = job
        try:
            yield job
        finally:
            os.environ.clear()
            os.environ.update(saved)
            running.run("scancel", job)
    finally:
        left = running.stop()
        shutil.rmtree(root, ignore_errors=True)
        if left:
            print(f"the test cluster left processes: {left}", file=sys.stderr)


@contextmanager
def _test_hosts(count: int) -> Iterator[Any]:
    """``count`` test hosts (``tests/backends/ssh/testhosts.py``: up for the bench, or
    shared with a test run); None for 0."""
    if not count:
        yield None
        return
    from tests.backends.ssh import testhosts

    why = testhosts.unavailable()
    if why is not None:
        raise SystemExit(f"no test hosts: {why}")
    with testhosts.shared(count) as hosts:
        yield hosts.part(0, count)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, default=100, help="executables")
    parser.add_argument("--slurm-nodes", type=int, default=3, help="nodes of the test cluster")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument(
        "--test-hosts",
        action="store_true",
        help="the Slurm nodes in test hosts (topo-h1..), and ssh over the same hosts",
    )
    args = parser.parse_args()
    os.chdir(ROOT)  # the nodes import this module from the launcher's cwd
    log_dir = Path(tempfile.mkdtemp(prefix="topo-slurm-bench-runs-"))
    prog = program(args.nodes)
    ways: dict[str, tuple[str, dict[str, Any]]] = {"slurm": ("slurm", {}), "procs": ("procs", {})}
    load0 = os.getloadavg()[0]
    with _test_hosts(args.slurm_nodes if args.test_hosts else 0) as hosts:
        if hosts is not None:
            inventory = hosts.inventory(log_dir / "hosts.yaml")
            ways["ssh"] = ("ssh", {"hosts": str(inventory)})
        times: dict[str, list[float]] = {w: [] for w in ways}
        with allocation(args.slurm_nodes, hosts) as job:
            for i in range(args.repeats):
                print(f"repeat {i + 1}/{args.repeats} (job {job})", flush=True)
                for way, (backend, options) in ways.items():
                    times[way].append(time_to_ready(prog, backend, options, log_dir))
    shutil.rmtree(log_dir, ignore_errors=True)
    text = report(args, times, load0)
    out = ROOT / "bench" / "results" / "slurm-bench.md"
    out.write_text(text)
    print(text)


def report(args: argparse.Namespace, times: dict[str, list[float]], load0: float) -> str:
    """The results as bench/results/slurm-bench.md."""
    med = {w: statistics.median(t) for w, t in times.items()}
    command = f".venv/bin/python bench/slurm_bench.py --nodes {args.nodes} --repeats {args.repeats}"
    if args.test_hosts:
        command += " --test-hosts"
    lines = [
        "# slurm backend: time to ready",
        "",
        f"`{command}` — {args.nodes} trivial courier executables, `topo.launch` -> every "
        f"node ready; slurm inside an allocation of {args.slurm_nodes} Slurm nodes (the "
        "tests' cluster: one slurmd per node, "
        + (
            "each in a test host of its own), ssh over the same test hosts"
            if args.test_hosts
            else "all on this machine)"
        )
        + ", procs on this machine"
        + f"; interleaved in one run, median of {args.repeats}. "
        f"{time.strftime('%Y-%m-%d %H:%M')}, Python {platform.python_version()}, "
        f"{os.cpu_count()} CPUs, load average {load0:.1f} -> {os.getloadavg()[0]:.1f} "
        "(a shared, busy machine).",
        "",
        "| backend | median ready (s) | samples (s) | ratio to procs |",
        "|---|---|---|---|",
    ]
    for way, samples in times.items():
        shown = ", ".join(f"{s:.2f}" for s in samples)
        lines.append(f"| {way} | {med[way]:.2f} | {shown} | {med[way] / med['procs']:.2f} |")
    if "ssh" in med:
        lines += ["", f"slurm / ssh: {med['slurm'] / med['ssh']:.2f} (the issue's bar: ≤ 2)."]
    lines += [
        "",
        "The slurm run adds, to what procs does, the allocation's read (`scontrol show job`, "
        "`show node` per node), one `srun --overlap` step per Slurm node starting topo's "
        "stream agent (an interpreter and its imports each), and CURVE on TCP.",
    ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
