"""Median seconds of ``topo.load`` (load + compile) of one topology file, in this process.

Prints one number, so two checkouts can be compared round by round, each in a fresh
process (``PYTHONPATH`` picks the checkout):

    f=examples/topologies/acme_distributed.yaml
    git worktree add /tmp/old OLD_REV
    for i in 1 2 3 4 5; do
      PYTHONPATH=. .venv/bin/python bench/load_time.py $f num_actors=9995
      PYTHONPATH=/tmp/old .venv/bin/python bench/load_time.py $f num_actors=9995
    done

Not a test: nothing here asserts timing.
"""

from __future__ import annotations

import argparse
import statistics
import time

from topo.api import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("params", nargs="*", help="NAME=VALUE overrides")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    load(args.file, args.params)  # warm: imports and caches
    times = []
    for _ in range(args.runs):
        start = time.perf_counter()
        load(args.file, args.params)
        times.append(time.perf_counter() - start)
    print(f"{statistics.median(times):.4f}")


if __name__ == "__main__":
    main()
