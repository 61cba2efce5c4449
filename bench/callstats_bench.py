"""What the per-method call counters (``topo.runtime.callstats``) cost per call, measured
directly: the callee's ``served`` with its two clock reads, and the caller's ``caller``
look-up and ``made``, each timed over a million calls against an empty call in the same
run; put against the median tiny round trip of ``bench/rpc_bench.py``'s last results.

Run: ``.venv/bin/python bench/callstats_bench.py``. Writes bench/results/callstats.md
and .json.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import timeit
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"
N = 1_000_000


class Book:
    """Stands for the address book the figures are sent through (nothing is sent)."""

    def metrics(self, rows: object) -> None:
        pass


class Program:
    """Stands for the node's program (``ProgramContext``)."""

    program_id = "bench"
    address_book = Book()


def main() -> None:
    from topo.runtime import callstats

    book = Program()

    def served() -> None:
        start = time.perf_counter()
        callstats.served(book, "echo", "echo", time.perf_counter() - start, True)

    def made() -> None:
        start = time.perf_counter()
        callstats.made(book, "caller", "echo", "echo", time.perf_counter() - start, True)

    def empty() -> None:
        pass

    callstats._state.off = False
    served()
    made()
    rounds: dict[str, list[float]] = {"served": [], "made": [], "caller": []}
    for _ in range(5):
        base = timeit.timeit(empty, number=N)
        rounds["served"].append((timeit.timeit(served, number=N) - base) / N * 1e6)
        rounds["made"].append((timeit.timeit(made, number=N) - base) / N * 1e6)
        rounds["caller"].append((timeit.timeit(callstats.caller, number=N) - base) / N * 1e6)
    med = {k: statistics.median(v) for k, v in rounds.items()}
    rpc = json.loads((RESULTS / "rpc.json").read_text())
    tiny = rpc["results"]["topo.launch on procs, default rpc settings"]["tiny"]["median_us"]
    per_call = med["served"] + med["made"] + med["caller"]
    out = {"us": med, "rounds": rounds, "tiny_round_trip_us": tiny, "share": per_call / tiny}
    (RESULTS / "callstats.json").write_text(json.dumps(out, indent=2) + "\n")
    text = "\n".join(
        [
            "# Call counters: cost per call",
            "",
            f"Medians of 5 rounds of {N:,} calls each, against an empty call in the same round "
            f"({os.cpu_count()} shared CPUs, load average {os.getloadavg()[0]:.1f}).",
            "",
            "| part | µs per call |",
            "|---|---:|",
            f"| callee: `served` and its two clock reads | {med['served']:.2f} |",
            f"| caller: `caller()` (the calling node) | {med['caller']:.2f} |",
            f"| caller: `made` and its two clock reads | {med['made']:.2f} |",
            f"| **a call, both sides** | **{per_call:.2f}** |",
            "",
            f"Against the median tiny round trip of topo in `bench/results/rpc.md` ({tiny:.0f} "
            f"µs): {100 * per_call / tiny:.1f} % of a call.",
            "",
            "Rerun: `.venv/bin/python bench/callstats_bench.py`",
            "",
        ]
    )
    (RESULTS / "callstats.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
